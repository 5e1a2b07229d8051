"""The same scripted model behaviours through the page's API and through /v1's two
endpoints, Chat Completions and the Responses API (the official `openai` SDK), each with
one expected outcome for all three: the searches sent to Brave, the pages read, the tools
offered in each model request, what the tool results told the model, the warnings, the
final text and the failure kind. A client of /v1 reads a warning as a "Note:" line of the
answer's reasoning (a `reasoning` item's text on the Responses API), and a failure as
OpenAI's error code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import openai
import pytest
from mcp import Client

from tests.chat_client import new_conversation, send
from tests.fakes.conventions import llamacpp_stream_unparsed
from tests.fakes.llm_server import (
    Reply,
    ToolCall,
    context_length_exceeded,
    tools_unsupported,
)

BOTH = ("web_search", "web_fetch")
FETCH = ("web_fetch",)
NONE: tuple[str, ...] = ()
REFUSED = "this model rejected the web tools; the service searches for it instead, now and in later"
NOT_PARSED = "could not call the web tools (its output did not parse); the service searches for"
WITHHELD = "web tools not offered: this model refused them on"
SPENT = "the model called web_search, which was spent"
UNKNOWN = "the model called get_weather, which was spent"
REPEATED = "(The same call was made earlier in this answer; its result is repeated.)"
NOT_AVAILABLE = "web_search is not available now (no uses left or unknown tool)"
OPENAI_CODES = {"context_length_exceeded": "context_overflow"}
"""/v1 answers a failure with OpenAI's code where OpenAI has one, else with our kind."""


@dataclass(frozen=True)
class Outcome:
    """What a user, or the model, would notice of one question answered."""

    text: str | None
    """The final answer; None when the answer failed."""
    failure: str | None = None
    searches: int = 0
    """Searches that reached the search engine (Brave), not answered from earlier."""
    pages: int = 0
    offered: tuple[tuple[str, ...], ...] = ()
    """The tools declared in each model request, in order."""
    results: tuple[str, ...] = ()
    """The first line of each tool result in the last model request."""
    warnings: tuple[str, ...] = ()
    """A fragment of each warning, in order."""


@dataclass(frozen=True)
class Case:
    name: str
    script: Callable[[], list[Reply]]
    expected: Outcome
    again: Outcome | None = None
    """A second question afterwards (the next turn; the next request of /v1), scripted to
    answer "Again.": what the model server's behaviour left remembered."""


def search(query: str) -> Reply:
    return Reply(tool_calls=[ToolCall("web_search", {"query": query})])


def search_steps(text: str) -> list[Reply]:
    """The query a model without tool calling writes in the search-first step, and no page
    to read."""
    return [Reply(text=f'{{"query": "{text}"}}'), Reply(text='{"read": 0}')]


CASES = [
    Case(
        "a refused tools field, remembered, searched first",
        lambda: [
            tools_unsupported(),
            *search_steps("what it is"),
            Reply(text="Without tools."),
            *search_steps("and then"),  # the next question's
        ],
        Outcome(
            "Without tools.", searches=1, offered=(BOTH, NONE, NONE, NONE), warnings=(REFUSED,)
        ),
        again=Outcome("Again.", searches=1, offered=(NONE, NONE, NONE), warnings=(WITHHELD,)),
    ),
    Case(
        "a round the server could not parse, discarded, searched first and retried",
        lambda: [
            llamacpp_stream_unparsed("fake-model", ["You may call ", "these tools"]),
            *search_steps("warsaw capital"),
            Reply(text="Warsaw."),
        ],
        Outcome("Warsaw.", searches=1, offered=(BOTH, NONE, NONE, NONE), warnings=(NOT_PARSED,)),
        # Not remembered: one output that did not parse says nothing of the next.
        again=Outcome("Again.", offered=(BOTH,)),
    ),
    Case(
        "the same call repeated",
        lambda: [search("python asyncio"), search("python asyncio"), Reply(text="Done.")],
        Outcome(
            "Done.",
            searches=1,
            offered=(BOTH, ("web_search", "web_fetch"), ("web_search", "web_fetch")),
            results=("Results for 'python asyncio':", REPEATED),
        ),
    ),
    Case(
        "the search cap reached",
        lambda: [search("one"), search("two"), search("three"), search("four"), Reply(text="Ok.")],
        Outcome(
            "Ok.",
            searches=3,
            offered=(BOTH, BOTH, BOTH, FETCH, FETCH),
            results=(
                "Results for 'one':",
                "Results for 'two':",
                "Results for 'three':",
                NOT_AVAILABLE,
            ),
            warnings=(SPENT,),
        ),
    ),
    Case(
        "the last round answering without tools",
        lambda: [*(search("again and again") for _ in range(6)), Reply(text="Enough.")],
        Outcome(
            "Enough.",
            searches=1,
            offered=(*(BOTH for _ in range(6)), NONE),
            results=("Results for 'again and again':", *(REPEATED for _ in range(5))),
        ),
    ),
    Case(
        "a context overflow, retried once",
        lambda: [context_length_exceeded(), Reply(text="Short enough.")],
        Outcome("Short enough.", offered=(BOTH, BOTH)),
    ),
    Case(
        "a second context overflow",
        lambda: [context_length_exceeded(), context_length_exceeded()],
        Outcome(None, failure="context_overflow", offered=(BOTH, BOTH)),
    ),
    Case(
        "a stream cut mid-answer",
        lambda: [Reply(text="The first part of an answer that", split=4, break_after=3)],
        Outcome(None, failure="network", offered=(BOTH,)),
    ),
    Case(
        "a call of a tool nobody declared, beside ours",
        lambda: [
            Reply(
                tool_calls=[
                    ToolCall("web_search", {"query": "weather"}),
                    ToolCall("get_weather", {"city": "Kraków"}),
                ]
            ),
            Reply(text="Sunny."),
        ],
        Outcome(
            "Sunny.",
            searches=1,
            offered=(BOTH, BOTH),
            results=("Results for 'weather':", "get_weather is not available now"),
            warnings=(UNKNOWN,),
        ),
    ),
]


@dataclass
class Asked:
    """Counts before a question, to read what the question itself did."""

    brave: int
    pages: int
    requests: int


@dataclass
class Surface:
    """One way in: asks a question and reads what a user of it sees."""

    chat: object
    llm: object
    brave: object
    pages: object
    history: list[dict[str, object]] = field(default_factory=list)

    def counts(self) -> Asked:
        return Asked(len(self.brave.requests), len(self.pages.requests), len(self.llm.requests))

    def outcome(self, before: Asked, text: str | None, failure: str | None, warnings) -> Outcome:
        requests = self.llm.requests[before.requests :]
        last = requests[-1].body.get("messages", []) if requests else []
        return Outcome(
            text,
            failure,
            searches=len(self.brave.requests) - before.brave,
            pages=len(self.pages.requests) - before.pages,
            offered=tuple(
                tuple(t["function"]["name"] for t in r.body.get("tools", [])) for r in requests
            ),
            results=tuple(m["content"].splitlines()[0] for m in last if m["role"] == "tool"),
            warnings=tuple(warnings),
        )


class Page(Surface):
    conversation: str = ""

    def ask(self, question: str) -> Outcome:
        before = self.counts()
        self.conversation = self.conversation or new_conversation(self.chat)
        events = send(self.chat, self.conversation, question)
        end = events[-1]
        warnings = [e["message"] for e in events if e["type"] == "warning"]
        if end["type"] == "error":
            return self.outcome(before, None, end["kind"], warnings)
        return self.outcome(before, end["text"], None, warnings)


def sdk(chat) -> openai.OpenAI:
    """The official SDK on the service's transport, in-process or not."""
    return openai.OpenAI(
        base_url=f"{chat.url}/v1", api_key="-", max_retries=0, http_client=chat.client()
    )


def notes(reasoning: str) -> list[str]:
    """The warnings told in the reasoning, each a "Note: " line."""
    return [line[6:] for line in reasoning.splitlines() if line.startswith("Note: ")]


class V1(Surface):
    def ask(self, question: str) -> Outcome:
        before = self.counts()
        self.history.append({"role": "user", "content": question})
        try:
            answer = sdk(self.chat).chat.completions.create(
                model="fake-model", messages=self.history
            )
        except openai.APIStatusError as error:
            code = error.response.json()["error"]["code"]
            return self.outcome(before, None, OPENAI_CODES.get(code, code), [])
        message = answer.choices[0].message
        self.history.append({"role": "assistant", "content": message.content})
        reasoning = (message.model_extra or {}).get("reasoning_content") or ""
        return self.outcome(before, message.content, None, notes(reasoning))


class Responses(Surface):
    def ask(self, question: str) -> Outcome:
        before = self.counts()
        self.history.append({"role": "user", "content": question})
        try:
            answer = sdk(self.chat).responses.create(model="fake-model", input=self.history)
        except openai.APIStatusError as error:
            code = error.response.json()["error"]["code"]
            return self.outcome(before, None, OPENAI_CODES.get(code, code), [])
        self.history.append({"role": "assistant", "content": answer.output_text})
        reasoning = "\n".join(
            part.text for item in answer.output if item.type == "reasoning" for part in item.content
        )
        return self.outcome(before, answer.output_text, None, notes(reasoning))


def matches(seen: Outcome, expected: Outcome) -> bool:
    """Equal, the results and warnings compared by their expected start or fragment."""
    starts = len(seen.results) == len(expected.results) and all(
        line.startswith(start) for line, start in zip(seen.results, expected.results, strict=True)
    )
    warned = len(seen.warnings) == len(expected.warnings) and all(
        part in said for said, part in zip(seen.warnings, expected.warnings, strict=True)
    )
    same = {**vars(seen), "results": (), "warnings": ()} == {
        **vars(expected),
        "results": (),
        "warnings": (),
    }
    return same and starts and warned


@pytest.mark.parametrize("surface", [Page, V1, Responses], ids=["page", "v1", "responses"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_same_behaviour_through_the_page_and_v1(case, surface, chat, llm, brave, pages):
    llm.script(*case.script(), Reply(text="Again."))
    asking = surface(chat, llm, brave, pages)
    seen = asking.ask("What is it?")
    assert matches(seen, case.expected), (seen, case.expected)
    if case.again is not None:
        again = asking.ask("And then?")
        assert matches(again, case.again), (again, case.again)


@pytest.mark.socket  # the MCP SDK's client connects to an address
def test_mcp_serves_our_tools_as_the_model_is_declared_them(chat, llm):
    """One registry: an agent over MCP reads the same schema and description of web_search
    and web_fetch as the model of a page's turn and of /v1."""
    llm.script(Reply(text="Hi."), Reply(text="Hi."))
    send(chat, new_conversation(chat), "Hi")
    sdk(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "Hi"}]
    )
    page, v1 = (request.body["tools"] for request in llm.requests[-2:])
    assert page == v1

    async def listed() -> dict[str, object]:
        async with Client(f"{chat.url}/mcp", read_timeout_seconds=60) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    served = asyncio.run(listed())
    assert [t["function"]["name"] for t in page] == ["web_search", "web_fetch"]
    for declared in page:
        tool = served[declared["function"]["name"]]
        assert tool.input_schema == declared["function"]["parameters"]
        assert tool.description == declared["function"]["description"]
