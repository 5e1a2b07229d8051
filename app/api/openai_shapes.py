"""The OpenAI Chat Completions shapes of /v1 (docs/openai.md): the request body as the
official SDK sends it, errors as {"error": {message, type, param, code}}, and the
chat.completion and chat.completion.chunk objects."""

from __future__ import annotations

import secrets
import time
from typing import Annotated, ClassVar, Literal, Required

from pydantic import BaseModel, ConfigDict, Field, StrictBool
from typing_extensions import TypedDict

from app.chat.completion import Citation, CompletionEvent
from app.chat.openai_wire import ChatMessage, FunctionTool, MessageToolCall, PassedOn
from app.chat.openai_wire import tool_call_object as message_tool_call
from app.config import LOCALE
from app.model.tool_calls import ToolCall
from app.model.usage import Usage
from app.research.budget import MAX_MINUTES, MAX_PAGES, MAX_SEARCHES

OWN_FIELDS = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "tools",
        "web_search_options",
        "n",
        "web_search",
        "search_language",
        "search_activity",
        "sources_in_text",
        "research",
    }
)
"""Fields read here; every other one is the model server's (temperature, stop, seed...)."""
DROPPED_FIELDS = frozenset({"store", "metadata", "user", "service_tier", "prediction"})
"""OpenAI's own platform's fields, which a model server would not know."""
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    421: "invalid_request_error",
    429: "rate_limit_error",
}


# The objects answered, as OpenAI's reference and its SDK (openai.types.chat) name their
# fields; `reasoning_content` and `sources` are extensions (docs/openai.md).


class ErrorDetail(TypedDict):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(TypedDict):
    error: ErrorDetail


class PromptTokensDetails(TypedDict):
    cached_tokens: int


class CompletionUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class UrlCitation(TypedDict):
    url: str
    title: str
    start_index: int
    end_index: int


class Annotation(TypedDict):
    """A `[n]` of the text that cites a source, as Chat Completions nests it."""

    type: Literal["url_citation"]
    url_citation: UrlCitation


class SourceObject(TypedDict):
    """A result or page of the answer, numbered as `[n]` cites it (our extension)."""

    number: int
    url: str
    title: str
    date: str | None
    read: bool


class DeltaToolCall(MessageToolCall):
    index: int


class ChoiceDelta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str
    reasoning_content: str
    tool_calls: list[DeltaToolCall]
    annotations: list[Annotation]
    sources: list[SourceObject]


class ChunkChoice(TypedDict):
    index: int
    delta: ChoiceDelta
    logprobs: None
    finish_reason: str | None


class ChatCompletionChunk(TypedDict, total=False):
    id: Required[str]
    object: Required[Literal["chat.completion.chunk"]]
    created: Required[int]
    model: Required[str]
    choices: Required[list[ChunkChoice]]
    usage: CompletionUsage | None
    """With include_usage: null on each chunk but the last, a chunk without choices."""


class AssistantMessage(TypedDict, total=False):
    role: Required[Literal["assistant"]]
    content: Required[str | None]
    refusal: Required[None]
    reasoning_content: str
    tool_calls: list[MessageToolCall]
    annotations: list[Annotation]
    sources: list[SourceObject]


class CompletionChoice(TypedDict):
    index: int
    message: AssistantMessage
    logprobs: None
    finish_reason: str


class ChatCompletion(TypedDict, total=False):
    id: Required[str]
    object: Required[Literal["chat.completion"]]
    created: Required[int]
    model: Required[str]
    choices: Required[list[CompletionChoice]]
    usage: CompletionUsage


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: StrictBool = False


class Approximate(BaseModel):
    model_config = ConfigDict(extra="allow")
    country: Annotated[str, Field(pattern=r"^[A-Za-z]{2}$")] | None = None
    """ISO 3166-1 alpha-2, as OpenAI's user_location takes it."""


class UserLocation(BaseModel):
    model_config = ConfigDict(extra="allow")
    approximate: Approximate | None = None


class WebSearchOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    user_location: UserLocation | None = None


class ResearchOptions(BaseModel):
    """`research` as an object: the run's budget, each bound within the service's caps
    (docs/research.md); one left out is the default."""

    model_config = ConfigDict(extra="forbid")
    searches: Annotated[int, Field(ge=1, le=MAX_SEARCHES)] | None = None
    pages: Annotated[int, Field(ge=1, le=MAX_PAGES)] | None = None
    minutes: Annotated[float, Field(gt=0, le=MAX_MINUTES)] | None = None


class OurFields(BaseModel):
    """The fields of ours both endpoints read beside OpenAI's: `web_search` (false: no web
    tools for this request), `search_language` (the results' language, 'de' or 'de-AT';
    the country may come from the request's user_location), `search_activity` (false:
    what was searched and read is not told) and `sources_in_text` (true: the cited sources
    listed as links after the answer, for a client that shows no annotations)."""

    model_config = ConfigDict(extra="allow")
    model: Annotated[str, Field(min_length=1, max_length=200)]
    web_search: StrictBool = True
    search_language: Annotated[str, Field(pattern=LOCALE.pattern)] | None = None
    search_activity: StrictBool | None = None
    """None: SEARCH_ACTIVITY_IN_REASONING's (on unless set off)."""
    sources_in_text: StrictBool | None = None
    """None: SOURCES_IN_TEXT's (off unless set on)."""
    location_param: ClassVar[str] = "web_search_options"
    """The field that holds the user's location, named when its country is refused."""

    def passed_on(self) -> PassedOn:
        """The model server's own fields, as the client sent them."""
        raise NotImplementedError

    @property
    def country(self) -> str | None:
        """The country of the search results the request names (ISO 3166-1 alpha-2)."""
        raise NotImplementedError


class ChatCompletionBody(OurFields):
    """POST /v1/chat/completions, with our four fields (`OurFields`) and `research` (true,
    or its budget: the last user message researched, docs/research.md)."""

    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=2000)]
    """Kept as sent: a message's, a part's or a tool's fields not named in their types
    stay in them (extra="allow" reaches the TypedDicts) and pass on to the model."""
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    tools: Annotated[list[FunctionTool], Field(max_length=128)] | None = None
    web_search_options: WebSearchOptions | None = None
    n: Annotated[int, Field(ge=1, le=1)] | None = None
    research: StrictBool | ResearchOptions = False

    def passed_on(self) -> PassedOn:
        """The model server's own fields, as the client sent them."""
        extra = self.model_extra or {}
        return {k: v for k, v in extra.items() if k not in OWN_FIELDS | DROPPED_FIELDS}

    @property
    def country(self) -> str | None:
        options = self.web_search_options
        where = options.user_location if options else None
        return where.approximate.country if where and where.approximate else None


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> OpenAIErrorBody:
    """OpenAI's error object for a status of ours."""
    codes = {413: "request_too_large", 401: "invalid_api_key"}
    code = code or codes.get(status)
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, object]]:
    return {
        s: {
            "description": "an OpenAI-shaped error",
            "content": {"application/json": {"schema": ERROR_SCHEMA}},
        }
        for s in statuses
    }


def usage_object(usage: Usage) -> CompletionUsage:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def annotation(citation: Citation) -> Annotation:
    """OpenAI's url_citation, as Chat Completions nests it."""
    return {
        "type": "url_citation",
        "url_citation": {
            "url": citation.url,
            "title": citation.title,
            "start_index": citation.start,
            "end_index": citation.end,
        },
    }


def sources_object(event: CompletionEvent) -> list[SourceObject]:
    """Every result and page of the answer, numbered as `[n]` cites them (an extension:
    `read` marks a page read, not merely listed)."""
    return [
        {"number": n, "url": s["url"], "title": s["title"], "date": s["date"], "read": s["read"]}
        for n, s in enumerate(event.sources, 1)
    ]


def delta_tool_call(call: ToolCall, index: int) -> DeltaToolCall:
    return {"index": index, **message_tool_call(call)}


def kept_text(events: list[CompletionEvent]) -> tuple[str, str]:
    """The answer's text and reasoning, each discarded round's taken out."""
    text: list[str] = []
    reasoning: list[str] = []
    for event in events:
        if event.type == "delta":
            text.append(event.text)
        elif event.type == "reasoning":
            reasoning.append(event.text)
        elif event.type == "discard":
            text = [without_last("".join(text), event.discarded[0])]
            reasoning = [without_last("".join(reasoning), event.discarded[1])]
    return "".join(text), "".join(reasoning)


def without_last(text: str, chars: int) -> str:
    return text[: len(text) - chars]


class Chunks:
    """The chat.completion.chunk objects of one streamed answer."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.ident = f"chatcmpl-{secrets.token_hex(12)}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage

    def chunk(self, delta: ChoiceDelta, finish: str | None = None) -> ChatCompletionChunk:
        shaped: ChatCompletionChunk = {
            "id": self.ident,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if self.include_usage:
            shaped["usage"] = None  # as OpenAI: null on each chunk but the last
        return shaped

    def first(self) -> ChatCompletionChunk:
        return self.chunk({"role": "assistant", "content": ""})

    def of(self, event: CompletionEvent) -> list[ChatCompletionChunk]:
        """The chunks of one event of the answer."""
        if event.type == "delta":
            return [self.chunk({"content": event.text})]
        if event.type == "reasoning":
            return [self.chunk({"reasoning_content": event.text})]
        if event.type == "tool_calls":
            calls = [delta_tool_call(c, i) for i, c in enumerate(event.tool_calls)]
            return [self.chunk({"tool_calls": calls})]
        if event.type == "discard":
            return []  # sent already: nothing takes a chunk back (a Note says it was garbage)
        delta: ChoiceDelta = {}
        if event.citations:
            delta["annotations"] = [annotation(c) for c in event.citations]
        if event.sources:
            delta["sources"] = sources_object(event)
        last = [self.chunk(delta, event.finish_reason)]
        if self.include_usage:
            last.append(
                {**self.chunk({}), "choices": [], "usage": usage_object(event.usage or Usage())}
            )
        return last


def completion_object(model: str, events: list[CompletionEvent]) -> ChatCompletion:
    """The whole answer as one chat.completion, without what was discarded."""
    text, reasoning = kept_text(events)
    calls = [c for e in events if e.type == "tool_calls" for c in e.tool_calls]
    done = events[-1]
    message: AssistantMessage = {"role": "assistant", "content": text or None, "refusal": None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [message_tool_call(c) for c in calls]
    message["annotations"] = [annotation(c) for c in done.citations]
    if done.sources:
        message["sources"] = sources_object(done)
    shaped: ChatCompletion = {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": done.finish_reason}
        ],
    }
    if done.usage is not None:
        shaped["usage"] = usage_object(done.usage)
    return shaped
