"""The answer engine: the rounds of one answer, whichever surface asked (the page's turn,
/v1, anything later). It owns the tool loop, the caps and the last round without tools,
the recovery from a failed round (a context overflow, a `tools` field refused, output the
server could not parse), the refusal remembered per model, the search made first for a
model that cannot call tools (app/chat/search_first.py), and repeat detection (through the
`ToolRunner`).

A surface gives a `Prompt` (the context it assembles and the request's own fields) and
reads the engine's events: text, reasoning, usage, a finish reason, a tool step, a
warning, a round discarded, the client's own tool calls. The answer ends when the events
end; a failure the engine cannot recover from is raised as the `LLMError` it was."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from app.chat import search_first
from app.chat.fitting import Fitted
from app.chat.gathered import Gathered
from app.chat.openai_wire import ChatMessage, FunctionTool, PassedOn, assistant_tool_message
from app.chat.services import Services
from app.chat.structured import StructuredSteps
from app.chat.tool import ToolResult, Waiting
from app.chat.tools import ToolRunner
from app.chat.web_fetch import WEB_FETCH
from app.chat.web_search import WEB_SEARCH
from app.model.failures import Failure, LLMError
from app.model.tool_calls import ToolCall
from app.model.usage import RawUsage
from app.model.wire import RequestBody
from app.store.rows import ToolRefusal

logger = logging.getLogger(__name__)

REFUSED = "this model rejected the web tools"
REMEMBERED = ", now and in later turns (the model picker can clear that)"
INSTEAD = "the service searches for it instead"
WITHOUT = "answering without them"
NO_TEMPLATE_TOOLS = (
    "this model's chat template on the model server has no tool calling; the service "
    "searches for it instead"
)
NOT_PARSED = "this model could not call the web tools (its output did not parse)"


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Reasoning:
    text: str


@dataclass(frozen=True)
class Measured:
    """The usage the model server reported for one request, as it sent it."""

    usage: RawUsage | None


@dataclass(frozen=True)
class Finished:
    """A request's finish reason other than stop or tool_calls: ``length`` or
    ``content_filter``."""

    reason: str


@dataclass(frozen=True)
class Stepped:
    """One tool call run: its result (text for the model, step for the trail), and what
    the answer's tools have gathered with it (the surface's own copy)."""

    result: ToolResult
    gathered: Gathered


@dataclass(frozen=True)
class Warned:
    """Something the user should know of the answer; `refused` when the model's refusal of
    the tools was remembered now."""

    message: str
    refused: ToolRefusal | None = None


@dataclass(frozen=True)
class Discarded:
    """The round's output was garbage (a tool call the server could not parse): forget the
    last `text_chars` of text and `reasoning_chars` of reasoning sent."""

    text_chars: int
    reasoning_chars: int


@dataclass(frozen=True)
class ClientCalls:
    """Calls of the client's own tools: the answer ends here, for the client to run them."""

    calls: list[ToolCall]


EngineEvent = (
    Text | Reasoning | Measured | Finished | Waiting | Stepped | Warned | Discarded | ClientCalls
)


Own = TypeVar("Own")
"""A surface's own events, passed through the engine (the page's compression notices)."""


class Prompt(Protocol[Own]):
    """The surface's side of the request."""

    def context(self, runner: ToolRunner) -> list[ChatMessage]:
        """The messages ahead of this answer's tool exchanges, anew (the tool note follows
        the tools still offered)."""

    def fields(self) -> PassedOn:
        """The request's fields besides its messages and tools (model, max_tokens...)."""

    def fitted(self, text: str, messages: list[ChatMessage], tools: list[FunctionTool]) -> Fitted:
        """A tool result as it goes to the model (within the room left, where known)."""

    async def make_room(self) -> list[Own]:
        """After a context overflow before any output: whatever lets the retry fit, and
        what the surface tells of it."""


@dataclass(frozen=True)
class Round:
    """What one request streamed, returned as its last event: its text, the length of its
    reasoning, its tool calls; `failed`, the error that ended it early."""

    text: str = ""
    reasoning: int = 0
    calls: list[ToolCall] = field(default_factory=list)
    failed: LLMError | None = None

    @property
    def streamed(self) -> bool:
        return bool(self.text or self.reasoning)


@dataclass
class Engine(Generic[Own]):
    """The rounds of one answer."""

    services: Services
    prompt: Prompt[Own]
    runner: ToolRunner
    model: str
    client_tools: list[FunctionTool] = field(default_factory=list)
    """The client's own function tools (/v1): a call of one ends the answer."""
    messages: list[ChatMessage] = field(default_factory=list)
    """The request's messages: the prompt's context, then this answer's tool exchanges."""
    assembled: int = 0
    """How many of `messages` are the prompt's context."""
    produced: bool = False
    """Text, reasoning or a tool step was kept: a retry after an overflow would repeat it."""
    forced: bool = False
    """Room was made once after an overflow: a second one fails."""
    found: str = ""
    """What the search-first step found, given to the model after the question."""

    async def answer(self, refusal: ToolRefusal | None) -> AsyncIterator[EngineEvent | Own]:
        """The answer's events, round after round, until the model answers without a
        call of ours; `refusal` is the model's refusal of the tools remembered earlier."""
        untemplated = not self.services.served.takes_tools(self.model)
        if (refusal or untemplated) and self.runner.declarations():
            # Not declared at all: the server would refuse them again, and the retry costs
            # a round trip (and the tool note a share of the context) every time; a
            # template without tools ignores them.
            yield Warned(withheld_notice(refusal) if refusal else NO_TEMPLATE_TOOLS)
            async for searched in self.search_instead():
                yield searched
        self.assemble()
        rounds = self.services.settings.max_tool_rounds
        for number in range(rounds + 1):
            if number == rounds:
                self.runner.withdraw()  # the last round: answer now
            payload = self.payload()
            said = Round()
            async for event in self.stream_round(payload):
                if isinstance(event, Round):
                    said = event
                else:
                    yield event
            if said.failed:
                async for recovery in self.recover(said.failed, "tools" in payload, said):
                    yield recovery
                continue
            if not said.calls:
                return
            if theirs := [c for c in said.calls if c.name in self.client_names]:
                # The client runs its own; a call of ours in the same round is dropped (its
                # exchange could not be in the history the client sends back).
                yield ClientCalls(theirs)
                return
            async for event in self.run_tools(said):
                yield event

    @property
    def client_names(self) -> set[str]:
        return {t["function"]["name"] for t in self.client_tools}

    def assemble(self) -> None:
        """The prompt's context anew, this answer's tool exchanges kept after it."""
        fresh = self.prompt.context(self.runner)
        if self.found:
            fresh = search_first.with_found(fresh, self.found)
        self.messages, self.assembled = [*fresh, *self.messages[self.assembled :]], len(fresh)

    def tools(self) -> list[FunctionTool]:
        return [*self.client_tools, *self.runner.declarations()]

    def payload(self) -> PassedOn:
        payload: PassedOn = {**self.prompt.fields(), "messages": self.messages}
        if tools := self.tools():
            payload["tools"] = tools
        else:
            payload.pop("tool_choice", None)  # a server refuses tool_choice without tools
            payload.pop("parallel_tool_calls", None)
        return payload

    async def stream_round(self, payload: PassedOn) -> AsyncIterator[EngineEvent | Round]:
        """One request: its text and reasoning passed on, then what it streamed (`Round`),
        with the error that cut it, if one did."""
        text: list[str] = []
        reasoning, calls = 0, []
        try:
            async for event in self.services.model.stream(payload):
                if event.type == "delta":
                    text.append(event.text)
                    yield Text(event.text)
                elif event.type == "reasoning":
                    reasoning += len(event.text)
                    yield Reasoning(event.text)
                elif event.type == "usage":
                    yield Measured(event.usage)
                elif event.type == "tool_calls":
                    calls = event.tool_calls
                elif event.type == "finish" and event.text in ("length", "content_filter"):
                    yield Finished(event.text)
        except LLMError as error:
            yield Round("".join(text), reasoning, calls, failed=error)
            return
        said = Round("".join(text), reasoning, calls)
        self.produced = self.produced or said.streamed
        yield said

    async def recover(
        self, error: LLMError, declared: bool, said: Round
    ) -> AsyncIterator[EngineEvent | Own]:
        """After a failed round, what lets the next one succeed; or the error again."""
        if error.kind == Failure.TOOLS_UNSUPPORTED and declared:
            # The round runs again without tools, ours and the client's (once: the retry
            # declares none), and without the note that offers them.
            logger.info("%s refused the tools: the round again without them", self.model)
            async for event in self.without_tools(error, said):
                yield event
            async for event in self.search_instead():
                yield event
            self.client_tools = []
            self.assemble()
        elif error.kind == Failure.CONTEXT_OVERFLOW and not self.produced and not self.forced:
            self.forced = True
            for own in await self.prompt.make_room():
                yield own
            self.assemble()
        else:
            raise error

    async def without_tools(self, error: LLMError, said: Round) -> AsyncIterator[EngineEvent]:
        """What the user is told when the tools are dropped: a server that refuses their
        declarations is remembered (every later answer would be refused too); llama.cpp,
        which streams the text and then fails when it does not parse as a tool call, has
        that text discarded: it is garbage."""
        refused = None
        then = INSTEAD if self.searches_instead() else WITHOUT
        message = f"{REFUSED}; {then}"
        if error.tools_refused:
            refused = await self.services.storage.refuse_tools(self.model, error.message)
            message += REMEMBERED
        if said.streamed:
            yield Discarded(len(said.text), said.reasoning)
            message = f"{NOT_PARSED}; {then}"
        yield Warned(message, refused)

    def searches_instead(self) -> bool:
        """Whether the tools' withdrawal leaves a search for the service to make: one is
        left, and this answer made none."""
        return self.runner.left.get(WEB_SEARCH.name, 0) > 0 and not self.runner.searched()

    async def search_instead(self) -> AsyncIterator[EngineEvent]:
        """The tools withdrawn; a model that cannot call them still searches, once, unless
        this answer searched already or may not: the service searches before it answers,
        and reads the one result's page the model asks for."""
        if self.searches_instead():
            history = self.messages or self.prompt.context(self.runner)
            steps = StructuredSteps(self.services.model)
            params = self.services.settings.model_params.get(self.model, {})
            fields: RequestBody = {"model": self.model, **params}
            query, usage = await search_first.written_query(steps, fields, history)
            if usage is not None:
                yield Measured(usage)
            async for event in self.run_first(search_first.search_call(query), history):
                yield event
            if self.runner.left.get(WEB_FETCH.name, 0) > 0 and self.runner.sources:
                url, usage = await search_first.chosen_page(
                    steps, fields, history, self.found, self.runner.sources
                )
                if usage is not None:
                    yield Measured(usage)
                if url is not None:
                    async for event in self.run_first(search_first.fetch_call(url), history):
                        yield event
        self.runner.withdraw()

    async def run_first(
        self, call: ToolCall, history: list[ChatMessage]
    ) -> AsyncIterator[EngineEvent]:
        """One call the service makes for the model, told as made without tool calling; its
        result within the room left goes after the question with the others (`assemble`)."""
        if waiting := await self.runner.waiting(call):
            yield waiting
        result = await self.runner.run(call)
        if result.event["type"] != "warning":
            result.event["without_tools"] = True
        given = search_first.with_found(history, self.found) if self.found else history
        fitted = self.prompt.fitted(result.text, given, [])
        result = self.runner.as_given(result, fitted)
        self.found = f"{self.found}\n\n{fitted.text}" if self.found else fitted.text
        self.produced = True
        logger.info("%s cannot call tools: %s made first", self.model, call.name)
        yield Stepped(result, self.runner.gathered())

    async def run_tools(self, said: Round) -> AsyncIterator[EngineEvent]:
        """A round's calls of our tools: each result to the model, each step told."""
        self.messages.append(assistant_tool_message(said.text, said.calls))
        for call in said.calls:
            if waiting := await self.runner.waiting(call):
                yield waiting  # said while it waits; its step follows
            result = await self.runner.run(call)
            self.produced = True
            fitted = self.prompt.fitted(result.text, self.messages, self.tools())
            result = self.runner.as_given(result, fitted)  # told as it is: never as read
            yield Stepped(result, self.runner.gathered())
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": fitted.text})


def withheld_notice(refusal: ToolRefusal) -> str:
    return (
        f"web tools not offered: this model refused them on {refusal['at'][:10]} "
        f"({refusal['reason']}); the service searches for it, without tool calling. Clear "
        "that in the model picker to try them again."
    )
