"""The OpenAI Responses API's shapes of POST /v1/responses (docs/openai.md): its body, and
the answer's events told as its stream (`response.created` ... `response.completed`, each
with its `sequence_number`) or as one `response` object, as OpenAI's reference and its
SDK's `openai.types.responses` name their fields.

Our searches and page reads are `web_search_call` items (a search's action with its query
and the results' addresses, a page read an `open_page`), the answer's `[n]` citations
`url_citation` annotations on the text of the message that holds them, as OpenAI's own web
search reports them."""

from __future__ import annotations

import secrets
import time
from typing import Annotated, ClassVar, Literal, Required

from pydantic import BeforeValidator, Field, StrictBool, ValidationInfo
from typing_extensions import TypedDict

from app.api.openai_shapes import OurFields
from app.chat.completion import Citation, CompletionEvent, citations
from app.chat.events import FetchEvent, SearchEvent, Source
from app.chat.openai_wire import PassedOn
from app.chat.responses_input import InputItem, ResponsesFunctionTool
from app.model.usage import Usage

OWN_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "stream",
        "tools",
        "tool_choice",
        "max_output_tokens",
        "reasoning",
        "text",
        "previous_response_id",
        "conversation",
        "web_search",
        "search_language",
        "search_activity",
        "sources_in_text",
    }
)
"""Fields read here; every other one is the model server's (temperature, top_p, seed...)."""
DROPPED_FIELDS = frozenset(
    {
        "store",
        "metadata",
        "user",
        "service_tier",
        "include",
        "truncation",
        "stream_options",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "max_tool_calls",
        "background",
    }
)
"""OpenAI's own platform's fields, which a model server would not know (nothing is stored
here: `store` changes nothing)."""
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


class ApproximateLocation(TypedDict, total=False):
    type: str
    country: Annotated[str, Field(pattern=r"^[A-Za-z]{2}$")] | None
    """ISO 3166-1 alpha-2, as OpenAI's user_location takes it."""


class WebSearchTool(TypedDict, total=False):
    """OpenAI's web search: ours already (searching is what this service does); its
    user_location's country is the results' country."""

    type: Required[Literal["web_search", "web_search_preview"]]
    user_location: ApproximateLocation | None


ResponsesTool = Annotated[ResponsesFunctionTool | WebSearchTool, Field(discriminator="type")]


def nothing_stored(value: object, info: ValidationInfo) -> None:
    """A field that needs a response kept here, refused naming it: nothing is stored (as of
    /v1/chat/completions), so the schema allows it only null."""
    if value is not None:
        raise ValueError(
            f"{info.field_name} is not supported: this service stores no responses; send the "
            "whole conversation as input"
        )


Unstored = Annotated[None, BeforeValidator(nothing_stored)]


class ResponsesBody(OurFields):
    """POST /v1/responses, with our four fields (`OurFields`)."""

    input: str | Annotated[list[InputItem], Field(min_length=1, max_length=2000)]
    instructions: str | None = None
    stream: StrictBool = False
    tools: Annotated[list[ResponsesTool], Field(max_length=128)] | None = None
    tool_choice: str | dict[str, object] | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    reasoning: dict[str, object] | None = None
    text: dict[str, object] | None = None
    previous_response_id: Unstored = None
    conversation: Unstored = None
    location_param: ClassVar[str] = "tools"

    def passed_on(self) -> PassedOn:
        """The model server's own fields as the client sent them, and those of the Responses
        API that Chat Completions names otherwise."""
        extra = self.model_extra or {}
        fields = {k: v for k, v in extra.items() if k not in OWN_FIELDS | DROPPED_FIELDS}
        if self.max_output_tokens:
            fields["max_tokens"] = self.max_output_tokens
        if choice := chat_tool_choice(self.tool_choice):
            fields["tool_choice"] = choice
        if self.reasoning and (effort := self.reasoning.get("effort")):
            fields["reasoning_effort"] = effort
        if format_ := response_format(self.text):
            fields["response_format"] = format_
        return fields

    @property
    def country(self) -> str | None:
        for tool in self.tools or []:
            if tool["type"] != "function":
                where = tool.get("user_location") or {}
                return where.get("country")
        return None

    @property
    def function_tools(self) -> list[ResponsesFunctionTool]:
        return [tool for tool in self.tools or [] if tool["type"] == "function"]


def chat_tool_choice(choice: str | dict[str, object] | None) -> object:
    """`tool_choice` as Chat Completions takes it: a function named inside `function`; the
    web search tool chosen is ours to run (left to the model)."""
    if isinstance(choice, dict):
        if choice.get("type") == "function":
            return {"type": "function", "function": {"name": choice.get("name")}}
        return None
    return choice


def response_format(text: dict[str, object] | None) -> object:
    """`text.format` of a structured output as Chat Completions' `response_format`."""
    given = (text or {}).get("format")
    if not isinstance(given, dict) or given.get("type") not in ("json_schema", "json_object"):
        return None
    if given["type"] == "json_object":
        return {"type": "json_object"}
    schema = {k: v for k, v in given.items() if k != "type"}
    return {"type": "json_schema", "json_schema": schema}


class Annotation(TypedDict):
    type: Literal["url_citation"]
    url: str
    title: str
    start_index: int
    end_index: int


class ContentPart(TypedDict, total=False):
    """An output_text part of a message, or a reasoning_text part of a reasoning item."""

    type: Required[Literal["output_text", "reasoning_text"]]
    text: Required[str]
    annotations: list[Annotation]
    logprobs: list[object]


class SearchSource(TypedDict):
    type: Literal["url"]
    url: str


class WebSearchAction(TypedDict, total=False):
    type: Required[Literal["search", "open_page"]]
    query: str
    sources: list[SearchSource]
    url: str


class OutputItem(TypedDict, total=False):
    """An item of `output`: a message, a reasoning item, a web_search_call of ours or a
    function_call of the client's tools."""

    id: Required[str]
    type: Required[Literal["message", "reasoning", "web_search_call", "function_call"]]
    status: Required[str]
    role: Literal["assistant"]
    content: list[ContentPart]
    summary: list[object]
    action: WebSearchAction
    call_id: str
    name: str
    arguments: str


class InputTokensDetails(TypedDict):
    cached_tokens: int
    cache_write_tokens: int


class OutputTokensDetails(TypedDict):
    reasoning_tokens: int


class ResponseUsage(TypedDict):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class ResponseError(TypedDict):
    code: str
    message: str


class Echoed(TypedDict):
    """What the request set that the response object tells back, as OpenAI's does."""

    instructions: str | None
    max_output_tokens: int | None
    temperature: object
    top_p: object
    tool_choice: object
    tools: list[ResponsesTool]
    parallel_tool_calls: object


class ResponseObject(Echoed):
    id: str
    object: Literal["response"]
    created_at: int
    completed_at: int | None
    status: str
    error: ResponseError | None
    incomplete_details: dict[str, str] | None
    model: str
    output: list[OutputItem]
    previous_response_id: None
    truncation: Literal["disabled"]
    metadata: dict[str, str]
    text: dict[str, object]
    usage: ResponseUsage | None


class StreamEvent(TypedDict, total=False):
    """One event of the stream; which fields it has follows its `type`, as the reference
    gives them (`response.output_text.delta`: item_id, output_index, content_index, delta,
    logprobs...)."""

    type: Required[str]
    sequence_number: Required[int]
    response: ResponseObject
    item: OutputItem
    output_index: int
    item_id: str
    content_index: int
    part: ContentPart
    delta: str
    text: str
    logprobs: list[object]
    annotation: Annotation
    annotation_index: int
    arguments: str
    name: str
    code: str
    message: str
    param: str | None


def echoed(body: ResponsesBody) -> Echoed:
    extra = body.model_extra or {}
    return {
        "instructions": body.instructions,
        "max_output_tokens": body.max_output_tokens,
        "temperature": extra.get("temperature"),
        "top_p": extra.get("top_p"),
        "tool_choice": body.tool_choice or "auto",
        "tools": list(body.tools or []),
        "parallel_tool_calls": extra.get("parallel_tool_calls", True),
    }


def usage_object(usage: Usage) -> ResponseUsage:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def web_search_item(step: SearchEvent | FetchEvent) -> OutputItem:
    """A search or a page read of ours as OpenAI's web search reports it: failed when it
    did, incomplete when it was not given to the model (no room in its window)."""
    status = "completed"
    if step.get("left_out"):
        status = "incomplete"
    elif step.get("error"):
        status = "failed"
    action: WebSearchAction
    if step["type"] == "search":
        listed: list[SearchSource] = [
            {"type": "url", "url": r["url"]} for r in step.get("results") or []
        ]
        action = {"type": "search", "query": step["query"], "sources": listed}
    else:
        action = {"type": "open_page", "url": step["url"]}
    ident = f"ws_{secrets.token_hex(12)}"
    return {"id": ident, "type": "web_search_call", "status": status, "action": action}


def annotation(cited: Citation) -> Annotation:
    """OpenAI's url_citation, as the Responses API puts it on the output text (flat)."""
    return {
        "type": "url_citation",
        "url": cited.url,
        "title": cited.title,
        "start_index": cited.start,
        "end_index": cited.end,
    }


class ResponseStream:
    """The events of one answer as the Responses API streams them. Each run of text is a
    message item, each run of reasoning a reasoning item, each search or page read of ours
    a web_search_call item and each call of the client's tools a function_call item, in
    the order they came; the last event holds the whole response. Without `streamed`, the
    text of a discarded round is taken out of its items (no client has seen it)."""

    def __init__(self, model: str, echo: Echoed, streamed: bool) -> None:
        self.ident = f"resp_{secrets.token_hex(12)}"
        self.created = int(time.time())
        self.model = model
        self.echo = echo
        self.streamed = streamed
        self.sequence = 0
        self.output: list[OutputItem] = []
        self.open: OutputItem | None = None
        self.sources: list[Source] = []

    def event(self, kind: str, **fields: object) -> StreamEvent:
        """The next event, numbered; its fields are those of StreamEvent its type has (one
        TypedDict for all the types, hence unchecked here)."""
        event = StreamEvent(type=kind, sequence_number=self.sequence)
        event.update(fields)  # type: ignore[typeddict-item]
        self.sequence += 1
        return event

    def response(
        self,
        status: str,
        usage: Usage | None = None,
        error: ResponseError | None = None,
        incomplete: str | None = None,
    ) -> ResponseObject:
        done = status in ("completed", "incomplete", "failed")
        return {
            **self.echo,
            "id": self.ident,
            "object": "response",
            "created_at": self.created,
            "completed_at": int(time.time()) if status == "completed" else None,
            "status": status,
            "error": error,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "model": self.model,
            "output": list(self.output) if done else [],
            "previous_response_id": None,
            "truncation": "disabled",
            "metadata": {},
            "text": {"format": {"type": "text"}},
            "usage": usage_object(usage) if usage else None,
        }

    def started(self) -> list[StreamEvent]:
        created = self.response("in_progress")
        return [
            self.event("response.created", response=created),
            self.event("response.in_progress", response=created),
        ]

    def of(self, told: CompletionEvent) -> list[StreamEvent]:
        """The events of one event of the answer."""
        if told.type == "delta":
            return [*self.opening("message"), self.text_delta(told.text)]
        step = told.step
        if told.type == "reasoning" and step and step["type"] in ("search", "fetch"):
            self.sources = told.sources
            return [*self.close(), *self.web_search(web_search_item(step))]
        if told.type == "reasoning":
            return [*self.opening("reasoning"), self.reasoning_delta(told.text)]
        if told.type == "discard":
            if not self.streamed:
                self.take_back("message", told.discarded[0])
                self.take_back("reasoning", told.discarded[1])
            return []  # sent already: nothing takes an event back
        if told.type == "tool_calls":
            events = self.close()
            for call in told.tool_calls:
                events += self.function_call(call.id, call.name, call.arguments)
            return events
        self.sources = told.sources
        return [*self.close(), self.finished(told)]

    def opening(self, kind: Literal["message", "reasoning"]) -> list[StreamEvent]:
        """The item a piece of text or reasoning goes to: the one open, or a new one."""
        if self.open is not None and self.open["type"] == kind:
            return []
        events = self.close()
        part: ContentPart
        if kind == "message":
            item: OutputItem = {
                "id": f"msg_{secrets.token_hex(12)}",
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        else:
            item = {
                "id": f"rs_{secrets.token_hex(12)}",
                "type": "reasoning",
                "status": "in_progress",
                "summary": [],
                "content": [],
            }
            part = {"type": "reasoning_text", "text": ""}
        events += self.added(item)
        item["content"] = [part]
        self.open = item
        return [*events, self.event("response.content_part.added", **self.where(), part={**part})]

    def added(self, item: OutputItem) -> list[StreamEvent]:
        self.output.append(item)
        return [
            self.event(
                "response.output_item.added", output_index=len(self.output) - 1, item={**item}
            )
        ]

    def where(self) -> dict[str, object]:
        assert self.open is not None
        return {
            "item_id": self.open["id"],
            "output_index": self.output.index(self.open),
            "content_index": 0,
        }

    def text_delta(self, text: str) -> StreamEvent:
        assert self.open is not None
        self.open["content"][0]["text"] += text
        return self.event("response.output_text.delta", **self.where(), delta=text, logprobs=[])

    def reasoning_delta(self, text: str) -> StreamEvent:
        assert self.open is not None
        self.open["content"][0]["text"] += text
        return self.event("response.reasoning_text.delta", **self.where(), delta=text)

    def close(self) -> list[StreamEvent]:
        """The open item's last events, its citations found in its text."""
        item, events = self.open, []
        if item is None:
            return []
        part = item["content"][0]
        if item["type"] == "message":
            part["annotations"] = [annotation(c) for c in citations(part["text"], self.sources)]
            for index, found in enumerate(part["annotations"]):
                events.append(
                    self.event(
                        "response.output_text.annotation.added",
                        **self.where(),
                        annotation_index=index,
                        annotation=found,
                    )
                )
            events.append(
                self.event(
                    "response.output_text.done", **self.where(), text=part["text"], logprobs=[]
                )
            )
        else:
            events.append(
                self.event("response.reasoning_text.done", **self.where(), text=part["text"])
            )
        events.append(self.event("response.content_part.done", **self.where(), part=part))
        item["status"] = "completed"
        events.append(
            self.event("response.output_item.done", output_index=self.output.index(item), item=item)
        )
        self.open = None
        return events

    def web_search(self, item: OutputItem) -> list[StreamEvent]:
        done = item["status"]
        events = self.added({**item, "status": "in_progress"})
        self.output[-1] = item
        where = {"item_id": item["id"], "output_index": len(self.output) - 1}
        events.append(self.event("response.web_search_call.in_progress", **where))
        events.append(self.event("response.web_search_call.searching", **where))
        if done == "completed":
            events.append(self.event("response.web_search_call.completed", **where))
        events.append(
            self.event("response.output_item.done", output_index=where["output_index"], item=item)
        )
        return events

    def function_call(self, call_id: str, name: str, arguments: str) -> list[StreamEvent]:
        item: OutputItem = {
            "id": f"fc_{secrets.token_hex(12)}",
            "type": "function_call",
            "status": "completed",
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
        }
        events = self.added({**item, "status": "in_progress", "arguments": ""})
        self.output[-1] = item
        where = {"item_id": item["id"], "output_index": len(self.output) - 1}
        events.append(
            self.event("response.function_call_arguments.delta", **where, delta=arguments)
        )
        events.append(
            self.event(
                "response.function_call_arguments.done", **where, arguments=arguments, name=name
            )
        )
        events.append(
            self.event("response.output_item.done", output_index=where["output_index"], item=item)
        )
        return events

    def take_back(self, kind: str, chars: int) -> None:
        """The last `chars` characters of the items of `kind`, from the end, taken out."""
        for item in reversed([i for i in self.output if i["type"] == kind]):
            if chars <= 0:
                return
            part = item["content"][0]
            kept = max(len(part["text"]) - chars, 0)
            chars -= len(part["text"]) - kept
            part["text"] = part["text"][:kept]
            if not part["text"]:
                self.output.remove(item)
                if self.open is item:
                    self.open = None

    def finished(self, done: CompletionEvent) -> StreamEvent:
        incomplete = INCOMPLETE.get(done.finish_reason)
        status = "incomplete" if incomplete else "completed"
        whole = self.response(status, done.usage, incomplete=incomplete)
        return self.event(f"response.{status}", response=whole)

    def whole(self, told: list[CompletionEvent]) -> ResponseObject:
        """The answer not streamed: the response its last event holds."""
        last = [event for each in told for event in self.of(each)][-1]
        return last["response"]

    def failed(self, code: str, message: str) -> list[StreamEvent]:
        """A failure after the stream began: OpenAI's error event, then response.failed."""
        events = [self.event("error", code=code, message=message, param=None)]
        error: ResponseError = {"code": code, "message": message}
        return [
            *events,
            self.event("response.failed", response=self.response("failed", error=error)),
        ]
