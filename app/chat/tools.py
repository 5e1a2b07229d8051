"""The runner of our tools within one answer: the uses left of each tool of the registry
(app/chat/registry.py), told to the model in plain words; a spent tool is withdrawn; an
identical call is answered from the first result; arguments of the wrong type, or a
failure, are text the model reads. It numbers the answer's sources for [n] citations and
gathers what the tools gave, handed out as a value (`Gathered`) for the answer's digest.

What the web says reaches the model inside <untrusted-data> blocks it is told never to obey
(app/webtext.py); web_fetch reads only an address given to the model (app/chat/web_fetch.py).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from app import config
from app.chat.events import Source, Step, WarningEvent
from app.chat.fitting import Fitted
from app.chat.gathered import Gathered
from app.chat.given_addresses import GivenAddresses, Planted
from app.chat.openai_wire import FunctionTool
from app.chat.registry import REGISTRY, TOOLS
from app.chat.settings import ChatSettings
from app.chat.tool import CallArguments, ToolResult, Waiting
from app.model.tool_calls import ToolCall
from app.pages.fetch import Extract, extract_in_thread
from app.search.searcher import Searcher
from app.store.rows import Message
from app.webtext import PASSAGE_MARK


def caps(chosen: ChatSettings) -> dict[str, int]:
    """Each tool's uses per answer, as the settings allow them."""
    return {tool.name: tool.cap(chosen) for tool in REGISTRY}


@dataclass
class ToolRunner:
    searcher: Searcher
    settings: config.Settings
    locale: str
    engines: str | None
    left: dict[str, int]
    """Each tool's uses left in this answer, by name (0 or absent: not offered)."""
    history: list[Message] = field(default_factory=list)
    """The conversation: the addresses in its user messages and kept digests are given.
    Read only when a page is fetched: gathered every turn, a long conversation's text
    would cost every turn."""
    extract: Extract = extract_in_thread
    person: int | None = None
    """Who asks in household mode (the conversation's owner): their own search cache."""
    sources: list[Source] = field(default_factory=list)
    done: dict[str, ToolResult] = field(default_factory=dict)
    given: GivenAddresses = field(default_factory=GivenAddresses)
    """The addresses web_fetch may read; the history's are added at the first fetch."""
    history_read: bool = False
    planted: Planted = field(default_factory=Planted)
    """Addresses the model wrote in its queries: never given by a result that echoes them."""
    snippets: dict[int, str] = field(default_factory=dict)
    """Each search result's text by source number, for the answer's digest."""
    excerpts: dict[int, str] = field(default_factory=dict)
    """The start of each page read, by source number, for the answer's digest."""
    passages: dict[int, str] = field(default_factory=dict)
    """The text of each page a search engine read (Brave's LLM Context), by source number:
    the research mode notes it as a page read."""
    reads: Counter[int] = field(default_factory=Counter)
    """How many reads of each page, by source number, reached the model."""

    def declarations(self) -> list[FunctionTool]:
        """Only the tools with uses left: a spent tool is withdrawn so the model answers."""
        return [tool.declaration for tool in REGISTRY if self.left.get(tool.name, 0) > 0]

    def withdraw(self) -> None:
        """No tool from here on: the model cannot take them, or must answer now."""
        self.left = dict.fromkeys(self.left, 0)

    def note(self, template: str) -> str:
        """The tool note with each tool's uses left in its placeholder."""
        # Plain replacement, not str.format: an edited note may hold other braces.
        for tool in REGISTRY:
            template = template.replace(
                "{" + tool.placeholder + "}", str(self.left.get(tool.name, 0))
            )
        return template

    def searched(self) -> bool:
        """A search was made in this answer (whatever it found)."""
        return any(result.event["type"] == "search" for result in self.done.values())

    def is_repeat(self, call: ToolCall) -> bool:
        """The same call was made earlier in this answer: its result is given again."""
        return call_key(call) in self.done

    async def waiting(self, call: ToolCall) -> Waiting | None:
        """What the call will wait for before it runs, when that is worth saying."""
        tool = TOOLS.get(call.name)
        if tool is None or self.left.get(call.name, 0) <= 0 or self.is_repeat(call):
            return None
        arguments = tool.parse(loaded(call.arguments) or {})
        return None if isinstance(arguments, str) else await tool.waiting(arguments, self)

    async def run(self, call: ToolCall) -> ToolResult:
        if (key := call_key(call)) in self.done:
            first = self.done[key]
            return ToolResult(
                "(The same call was made earlier in this answer; its result is repeated.)\n"
                + first.text,
                repeated(first.event),
            )
        arguments = loaded(call.arguments)
        if arguments is None:
            return ToolResult(
                f"{call.name} failed: its arguments are not a valid JSON object",
                warning_event(f"the model sent broken arguments to {call.name}"),
                warning=f"{call.name}: broken arguments",
            )
        tool = TOOLS.get(call.name)
        if tool is not None and isinstance(parsed := tool.parse(arguments), str):
            return ToolResult(
                f"{call.name} failed: {parsed}; call it again with arguments as described",
                warning_event(f"the model called {call.name} with {parsed}"),
                warning=f"{call.name}: {parsed}",
            )
        if tool is None or self.left.get(call.name, 0) <= 0:
            return ToolResult(
                f"{call.name} is not available now (no uses left or unknown tool): "
                "answer with what you have.",
                warning_event(f"the model called {call.name}, which was spent"),
            )
        self.left[call.name] -= 1
        result = await tool.run(parsed, self)
        self.done[key] = result
        return result

    def cite(
        self, url: str, title: str, domain: str, *, date: str | None = None, read: bool = False
    ) -> int:
        """The source's number for [n] citations; a page read marks its source as read,
        so the page can show pages read apart from results merely seen."""
        number = next((n for n, s in enumerate(self.sources, 1) if s["url"] == url), None)
        if number is None:
            self.sources.append(
                {"url": url, "title": title, "domain": domain, "date": date, "read": False}
            )
            number = len(self.sources)
        if read:
            self.sources[number - 1]["read"] = True
            self.reads[number] += 1
        return number

    def as_given(self, result: ToolResult, fitted: Fitted) -> ToolResult:
        """The result as the model got it: left out (`left_out`), or cut to the window,
        when a page Brave read lost every passage and is not read; else as it is."""
        if fitted.left_out is not None:
            return self.left_out(result, fitted)
        event = result.event
        if fitted.text == result.text or event["type"] != "search" or event.get("repeated"):
            return result
        read = event.get("read", [])
        kept = [n for n in read if passages_given(fitted.text, self.sources[n - 1])]
        if kept == read:
            return result
        for number in set(read) - set(kept):
            self.unread(number)
        return ToolResult(fitted.text, {**event, "read": kept}, result.warning)

    def left_out(self, result: ToolResult, fitted: Fitted) -> ToolResult:
        """A result the model's window had no room for (the model is told so instead), as
        the trail tells it: a page is not read, and its source is marked read only while
        another read of it reached the model."""
        event = result.event
        if event["type"] == "warning" or "error" in event:
            return ToolResult(fitted.text, event)  # a failure: nothing was read
        room = f"did not fit in the model's window ({fitted.left_out} tokens)"
        if event["type"] == "search":
            if not event.get("repeated"):
                for page in event.get("read", []):
                    self.unread(page)
            return ToolResult(
                fitted.text, {**event, "left_out": True, "error": f"results not given: {room}"}
            )
        number = event.get("source")
        if number and not event.get("repeated"):
            self.unread(number)
        return ToolResult(fitted.text, {**event, "left_out": True, "error": f"not read: {room}"})

    def unread(self, number: int) -> None:
        """One read of the page did not reach the model: not read unless another did."""
        self.reads[number] -= 1
        if self.reads[number] <= 0:
            self.sources[number - 1]["read"] = False
            self.excerpts.pop(number, None)
            self.passages.pop(number, None)

    def gathered(self) -> Gathered:
        """What the tools gathered so far, as a copy the caller keeps: a source found
        again later (read, this time) changes the runner's, not a copy handed out."""
        return Gathered(
            sources=tuple(source.copy() for source in self.sources),
            snippets=dict(self.snippets),
            excerpts=dict(self.excerpts),
            planted=Planted(set(self.planted.parts)),
        )


def passages_given(text: str, source: Source) -> bool:
    """Whether `text` (search results cut to a window) gives a passage of the page Brave read
    for `source`: its heading (number, title, address) followed by a first passage."""
    numbered = f"] {source['title']}\n{source['url']}\n"
    start = text.find(numbered)
    if start < 0:
        return False
    heading_end = text.find("\n", start + len(numbered))
    return heading_end >= 0 and text.startswith(PASSAGE_MARK, heading_end)


def loaded(arguments: str) -> CallArguments | None:
    """A call's arguments as the JSON object they should be; None when they are not one."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def call_key(call: ToolCall) -> str:
    """The same call, made again in the answer, has the same key."""
    return f"{call.name}:{normalized_arguments(call.arguments)}"


def warning_event(message: str) -> WarningEvent:
    return {"type": "warning", "message": message}


def repeated(event: Step) -> Step:
    """A step given again: the trail marks it (a warning is never kept to be repeated)."""
    if event["type"] == "warning":
        return event
    again = event.copy()
    again["repeated"] = True
    return again


def normalized_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return arguments
