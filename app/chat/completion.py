"""One answer to another client's chat request (the OpenAI-compatible /v1 of the web
layer): the client's messages, our web tools beside its own, the same tool loop as the
page's turn (docs/openai.md).

The history is the client's and nothing is stored. What the turn and this share is
reused, not copied: the tools and their caps (`ToolRunner`), the date anchor and the tool
note (`context.today_line`, `ToolRunner.note`), the model client's stream, the served
window (`Services.served_window`). The request's shapes are named in app.chat.openai_wire.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import date
from typing import Literal
from urllib.parse import urlsplit

from babel.languages import get_official_languages

from app import config
from app.chat import context, engine, fitting
from app.chat.compression import read_memory
from app.chat.events import Source, Step
from app.chat.fitting import Fitted, message_text
from app.chat.gathered import Gathered
from app.chat.openai_wire import ChatMessage, FunctionTool, PassedOn
from app.chat.services import Services
from app.chat.settings import DEFAULT_TOOL_NOTE, ChatSettings
from app.chat.tool import ToolResult, Waiting
from app.chat.tools import ToolRunner, caps
from app.model.failures import LLMError
from app.model.tool_calls import ToolCall
from app.model.usage import Usage, normalize_usage
from app.store.rows import Message

logger = logging.getLogger(__name__)

CITATION = re.compile(r"\[(\d{1,3})\]")

CompletionEventType = Literal["reasoning", "delta", "discard", "tool_calls", "done"]


@dataclass(frozen=True)
class CompletionRequest:
    """What the client asked, checked by the web layer."""

    model: str
    messages: list[ChatMessage]
    """The client's messages as sent (OpenAI's shapes: text or content parts)."""
    params: PassedOn = field(default_factory=dict)
    """Fields passed through to the model server as given (temperature, stop, ...)."""
    client_tools: list[FunctionTool] = field(default_factory=list)
    """The client's own function tools: a call of one ends the answer, for the client."""
    locale: str = "all"
    web_search: bool = True
    person: int | None = None
    """Household mode: who asks (a personal token's or a session's person): their memory.md
    in the prompt, their own search cache. None: no one named (the single-user modes, or
    AUTH_TOKEN), no memory."""
    """Our tools offered at all."""
    activity: bool = True
    """What was searched and read told as reasoning."""
    sources_in_text: bool = False
    """The cited sources listed at the end of the text, for clients that show no
    annotations (LibreChat)."""

    @property
    def client_names(self) -> set[str]:
        return {t["function"]["name"] for t in self.client_tools}


@dataclass(frozen=True)
class Citation:
    """A `[n]` of the answer that names a source: where it stands in the text."""

    url: str
    title: str
    start: int
    end: int


@dataclass
class CompletionEvent:
    """``reasoning`` / ``delta`` text; ``discard``: the last `discarded` characters of text
    and of reasoning were garbage (a streamed client has them already; a Note says so);
    ``tool_calls`` of the client's tools; ``done`` last, with the finish reason, the usage
    summed over every model request, the citations and the sources."""

    type: CompletionEventType
    text: str = ""
    discarded: tuple[int, int] = (0, 0)
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage | None = None
    citations: list[Citation] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    step: Step | None = None
    """On the ``reasoning`` line that tells a tool step: the step itself, with the `sources`
    gathered so far, for a surface that shows steps as items (the Responses API)."""


@dataclass
class ClientPrompt:
    """The engine's prompt for a client of /v1: our date and tool note ahead of the
    client's messages; the client's own request fields; the tool results fitted to the
    served window. What the client is sent is gathered here too."""

    services: Services
    request: CompletionRequest
    window: int | None = None
    text: str = ""
    """All the content the client was sent, for the citations' positions."""
    usage: Usage = field(default_factory=Usage)
    measured: bool = False
    finish: str = "stop"
    gathered: Gathered = field(default_factory=Gathered)
    """What the tools gathered, as the last step handed it: the answer's sources."""
    memory: str = ""
    """The named person's memory.md (household mode), else nothing."""

    def context(self, runner: ToolRunner) -> list[ChatMessage]:
        """[memory][date][tool note] as a system message ahead of the client's own."""
        note = runner.note(DEFAULT_TOOL_NOTE) if runner.declarations() else ""
        anchor = context.today_line(date.today())
        layers = context.Layers(
            persona="", memory=self.memory, summary="", today=anchor, tool_note=note
        )
        system: ChatMessage = {"role": "system", "content": layers.system_text()}
        return [system, *self.request.messages]

    def fields(self) -> PassedOn:
        """The client's own fields with ours (the one open shape). A client that caps
        nothing gets the page's cap: without one a small model may write until its window
        is full (thousands of tokens, minutes of a local server)."""
        passed: PassedOn = {
            **self.services.settings.model_params.get(self.request.model, {}),
            **self.request.params,
            "model": self.request.model,
        }
        if not {"max_tokens", "max_completion_tokens"} & passed.keys():
            passed["max_tokens"] = self.reserve()
        return passed

    def fitted(self, text: str, messages: list[ChatMessage], tools: list[FunctionTool]) -> Fitted:
        """A tool result within the room the served window leaves (unknown: as it is)."""
        return fitting.fitted(text, self.window, messages, tools, self.reserve())

    async def make_room(self) -> list[engine.EngineEvent]:
        """Nothing of the client's history is ours to fold: the served window is read again,
        for the results to fit a server that restarted with another one."""
        self.window = await self.services.served.reread_window(self.request.model)
        return []

    def add_usage(self, usage: Usage | None) -> None:
        if usage is None:
            return
        self.measured = True
        self.usage.prompt_tokens += usage.prompt_tokens
        self.usage.completion_tokens += usage.completion_tokens
        self.usage.cached_tokens += usage.cached_tokens

    def reserve(self) -> int:
        """The reply's share of the window: the client's max_tokens, else ours."""
        params = self.request.params
        asked = params.get("max_completion_tokens") or params.get("max_tokens")
        if isinstance(asked, int) and asked > 0:
            return asked
        window = self.window or self.services.settings.max_completion_tokens * 4
        return context.completion_reserve(self.services.settings.max_completion_tokens, window)


def runner_for(services: Services, request: CompletionRequest) -> ToolRunner:
    settings, names = services.settings, request.client_names
    allowed = caps(ChatSettings.defaults(settings)) if request.web_search else {}
    return ToolRunner(
        searcher=services.searcher,
        settings=settings,
        locale=request.locale,
        engines=None,
        # A client tool named like ours wins: ours is then not declared.
        left={name: uses for name, uses in allowed.items() if name not in names},
        history=given_history(request.messages),
        extract=services.extraction,
        person=request.person,
    )


def request_locale(country: str | None, language: str | None, default: str) -> str:
    """The search locale a request asks for: its language (``de`` or ``de-AT``) with its
    country (``AT``), a country alone with its first official language, else `default`
    (SEARCH_LOCALE). A ConfigError (400) when SearXNG could not take it."""
    country = (country or "").strip().upper()
    language = (language or "").strip()
    if language and country and "-" not in language:
        return config.check_locale(f"{language}-{country}")
    if language:
        return config.check_locale(language)
    if country:
        spoken = get_official_languages(country, de_facto=True) if country.isalpha() else ()
        if not spoken:
            raise config.ConfigError(f"unknown country {country[:8]!r} in user_location")
        return config.check_locale(f"{spoken[0]}-{country}")
    return default


def given_history(messages: list[ChatMessage]) -> list[Message]:
    """The client's user messages, as the addresses web_fetch may read take them."""
    return [
        {"role": "user", "content": message_text(m)} for m in messages if m.get("role") == "user"
    ]


async def answer(
    services: Services, request: CompletionRequest
) -> AsyncGenerator[CompletionEvent, None]:
    """The answer's events, the engine's rounds told as OpenAI's; closing this generator
    closes the model server's request (the client's hang-up is Stop)."""
    prompt = ClientPrompt(services, request, await services.served.window(request.model))
    if request.person is not None:
        prompt.memory = (await read_memory(services, request.person))[0]
    runner = runner_for(services, request)
    answering = engine.Engine(services, prompt, runner, request.model, list(request.client_tools))
    refusal = await services.storage.tool_refusal(request.model) if runner.declarations() else None
    try:
        async for said in answering.answer(refusal):
            if event := told(prompt, said):
                yield event
    except (GeneratorExit, asyncio.CancelledError):
        logger.info("v1 answer stopped by the client after %d chars", len(prompt.text))
        raise
    except LLMError as error:
        logger.info("v1 answer failed (%s): %s", error.kind, error.message)
        raise
    sources = list(prompt.gathered.sources)
    cited = citations(prompt.text, sources)
    if request.sources_in_text and cited:
        yield CompletionEvent("delta", sources_list(cited))
    logger.info("v1 answer complete: %d chars, %s", len(prompt.text), prompt.finish)
    yield CompletionEvent(
        "done",
        finish_reason=prompt.finish,
        usage=prompt.usage if prompt.measured else None,
        citations=cited,
        sources=sources,
    )


def told(prompt: ClientPrompt, said: engine.EngineEvent) -> CompletionEvent | None:
    """What the client is sent of one event of the engine; what it ran and what went wrong
    as reasoning lines, unless the client asked for none."""
    activity = prompt.request.activity
    match said:
        case engine.Text(text):
            prompt.text += text
            return CompletionEvent("delta", text)
        case engine.Reasoning(text):
            return CompletionEvent("reasoning", text)
        case engine.Measured(usage):
            prompt.add_usage(normalize_usage(usage))
        case engine.Finished(reason):
            prompt.finish = reason
        case Waiting(query, seconds) if activity:
            line = f"Search {query!r} waits {seconds:.0f} s for the search plan's rate"
            return CompletionEvent("reasoning", line + "\n")
        case engine.Stepped(result, gathered):
            prompt.gathered = gathered
            if activity and (line := activity_line(result)):
                sources = list(gathered.sources)
                return CompletionEvent("reasoning", line + "\n", sources=sources, step=result.event)
        case engine.Warned(message) if activity:
            return CompletionEvent("reasoning", f"Note: {message}\n")
        case engine.Discarded(text_chars, reasoning_chars):
            prompt.text = prompt.text[: len(prompt.text) - text_chars]
            return CompletionEvent("discard", discarded=(text_chars, reasoning_chars))
        case engine.ClientCalls(calls):
            prompt.finish = "tool_calls"
            return CompletionEvent("tool_calls", tool_calls=calls)
    return None


def activity_line(result: ToolResult) -> str:
    """One line per search (query, locale, results) and per page read (title, host); a
    page left out for lack of room is fetched, not read."""
    step: Step = result.event
    again = " (repeated: the earlier result)" if step.get("repeated") else ""
    if step["type"] == "search":
        where = f"{step['query']!r} ({step['language']})"
        if step.get("without_tools"):
            where += " without tool calling"
        if step.get("left_out"):
            return f"Searched {where}: {step.get('error')}{again}"
        if error := step.get("error"):
            return f"Search {where} failed: {error}{again}"
        return f"Searched {where}: {len(step.get('results') or [])} results{again}"
    if step["type"] == "fetch":
        host = urlsplit(step["url"]).hostname or step["url"]
        if step.get("left_out"):
            title = step.get("title") or step["url"]
            return f"Fetched {title!r} ({host}), {step.get('error')}{again}"
        if error := step.get("error"):
            return f"Could not read {host}: {error}{again}"
        return f"Read {step.get('title') or step['url']!r} ({host}){again}"
    return f"Note: {step['message']}"


def citations(text: str, sources: list[Source]) -> list[Citation]:
    """Each `[n]` of the text that names one of the answer's sources, ordered by the
    source's number (then by place): a client that numbers the sources in the order it
    receives them (Open WebUI) then numbers them as the text does, when every number up
    to the highest is cited."""
    found = []
    for match in CITATION.finditer(text):
        number = int(match.group(1))
        if 1 <= number <= len(sources):
            source = sources[number - 1]
            title = source["title"] or source["url"]
            found.append((number, Citation(source["url"], title, *match.span())))
    return [citation for _, citation in sorted(found, key=lambda pair: pair[0])]


def sources_list(cited: list[Citation]) -> str:
    """The cited sources as Markdown links after the answer, each once, by number."""
    lines: list[str] = []
    for citation in cited:
        line = f"- [{citation.title}]({citation.url})"
        if line not in lines:
            lines.append(line)
    return "\n\nSources:\n" + "\n".join(lines)
