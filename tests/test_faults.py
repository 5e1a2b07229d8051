"""Every outside failure ends in its kind: faults injected into the fakes, one chat turn
through the real service per case.

A model-server fault ends the turn with an `error` event of the right kind; the user's
message goes back when nothing had arrived, and text that had arrived stays, marked. A
search or page fault is a tool warning the model reads and the user sees, and the turn
ends with `done`. No case may answer HTTP 500. `bench/faults.py` runs the same CASES and
prints the table docs/performance.md quotes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from app.model.bounds import Limits
from app.model.client import ModelClient
from app.search.embedded import EmbeddedSearxng, free_port
from tests.conftest import SERVER_LOCALE, TLS, ChatService, chat_env, searxng_env
from tests.fakes.brave_api import FakeBrave
from tests.fakes.llm_server import (
    FakeLLM,
    Reply,
    ToolCall,
    content_filtered,
    context_length_exceeded,
    invalid_api_key,
    rate_limited,
    server_error,
    tools_unsupported,
)
from tests.fakes.loopback import LoopbackFake, LoopbackHandler
from tests.fakes.pages import PageServer

MESSAGE = "my carefully written question"
ANSWER = "The first part of an answer that goes on for a while."
SEARCH = Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi"})])
SORRY = Reply(text="The search did not work; here is what I know.")
SLOW_SEARXNG_SECONDS = 10.0  # far beyond the SEARXNG_TIMEOUT the case sets
Events = list[dict[str, Any]]


# --------------------------------------------------------------------------------------------
# Servers that fail on purpose


@contextmanager
def black_hole() -> Iterator[str]:
    """A port that accepts connections and never answers: the kernel completes them in
    the listen backlog, nobody reads them. A model server that hangs, probes included."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as sock:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def closed_port() -> str:
    """An address where nothing listens: connections are refused."""
    return f"http://127.0.0.1:{free_port()}"


class _SearxngHandler(LoopbackHandler):
    server: Any

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        mode = self.server.fake.mode
        if mode == "slow":
            deadline = time.monotonic() + SLOW_SEARXNG_SECONDS
            while time.monotonic() < deadline and not self.server.stopping:
                time.sleep(0.05)
            self.answer(200, "application/json", json.dumps({"results": []}))
        elif mode == "html":
            self.answer(200, "text/html", "<!doctype html><title>SearXNG</title><p>Search</p>")
        elif mode == "429":
            self.answer(429, "text/plain", "Too Many Requests")
        else:
            self.answer(403, "text/html", "<h1>403 Forbidden</h1>")

    def answer(self, status: int, content_type: str, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class BrokenSearxng(LoopbackFake):
    """A SearXNG stand-in failing one way: "slow", "html" (200 but not JSON), or the
    limiter's "429" or "403"."""

    _handler_class: ClassVar[type[LoopbackHandler]] = _SearxngHandler
    _thread_name = "broken-searxng"

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode


# --------------------------------------------------------------------------------------------
# One turn and what to expect of it


@dataclass
class Stack:
    """The shared fakes a case runs against; each turn gets a chat service of its own."""

    llm: FakeLLM
    pages: PageServer
    brave: FakeBrave
    searxng_url: str
    scratch: Path


@dataclass
class Turn:
    events: Events
    statuses: list[int]
    """Every HTTP status the turn got: create, chat, read back."""
    messages: list[dict[str, Any]]
    """The conversation's stored messages after the turn."""
    tool_results: list[str]
    """What the model was given back for its tool calls."""
    seconds: float

    @property
    def end(self) -> dict[str, Any]:
        return self.events[-1] if self.events else {}

    @property
    def text(self) -> str:
        return "".join(e["text"] for e in self.events if e["type"] == "delta")

    def outcome(self) -> str:
        """The failure kind, or how a turn that recovered ended."""
        if self.end.get("type") == "error":
            return str(self.end.get("kind"))
        warned = any(e["type"] == "warning" for e in self.events)
        return f"{self.end.get('type', 'nothing')}{' + warning' if warned else ''}"


@dataclass(frozen=True)
class Expect:
    kind: str | None
    """The error's kind; None: the turn recovers and ends with done and a warning."""
    says: str
    """In the error's message; for a warning, in the event, the warning and the tool result."""
    partial: bool = False
    """Text arrived before the failure: it is kept and marked, the message stays."""
    within: float = 30.0
    """A generous bound that proves a short timeout fired, not a default of minutes."""


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[Stack], Turn]
    expect: Expect


def take_turn(
    stack: Stack, *, searxng_url: str | None = None, message: str = MESSAGE, **env: str
) -> Turn:
    """One message through a fresh chat service configured with `env`."""
    data = Path(tempfile.mkdtemp(dir=stack.scratch))
    settings = chat_env(stack.llm, data, stack.pages, **env)
    chat = ChatService(settings, searxng_url or stack.searxng_url).start()
    statuses: list[int] = []
    events: Events = []
    try:
        with httpx.Client(base_url=chat.url, timeout=120, verify=TLS) as http:
            created = http.post("/api/conversations", json={"settings": {}})
            statuses.append(created.status_code)
            conversation = created.json()["id"]
            started = time.monotonic()
            with http.stream(
                "POST", f"/api/conversations/{conversation}/chat", json={"message": message}
            ) as response:
                statuses.append(response.status_code)
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line.removeprefix("data: ")))
            seconds = time.monotonic() - started
            stored = http.get(f"/api/conversations/{conversation}")
            statuses.append(stored.status_code)
    finally:
        chat.stop()
    last = stack.llm.requests[-1].body.get("messages", []) if stack.llm.requests else []
    tool_results = [m["content"] for m in last if m.get("role") == "tool"]
    return Turn(events, statuses, stored.json().get("messages", []), tool_results, seconds)


def problems(turn: Turn, expect: Expect) -> list[str]:
    """What is wrong with how the turn ended: empty when it ended as expected."""
    found = [f"HTTP {s}" for s in turn.statuses if s >= 500]
    if turn.seconds > expect.within:
        found.append(f"took {turn.seconds:.1f} s, more than {expect.within:g} s")
    if expect.kind is None:
        return found + recovered_problems(turn, expect)
    return found + failed_problems(turn, expect)


def recovered_problems(turn: Turn, expect: Expect) -> list[str]:
    found = []
    if turn.end.get("type") != "done":
        found.append(f"ended with {turn.end} instead of done")
    tool_errors = [e.get("error", "") for e in turn.events if e["type"] in ("search", "fetch")]
    warnings = [e["message"] for e in turn.events if e["type"] == "warning"]
    for where, texts in (
        ("the tool event's error", tool_errors),
        ("a warning", warnings),
        ("the tool result given to the model", turn.tool_results),
    ):
        if not any(expect.says in text for text in texts):
            found.append(f"{expect.says!r} not in {where}: {texts}")
    roles = [(m["role"], m.get("status")) for m in turn.messages]
    if roles != [("user", None), ("assistant", "complete")]:
        found.append(f"stored messages {roles}, not the question and a complete answer")
    return found


def failed_problems(turn: Turn, expect: Expect) -> list[str]:
    end = turn.end
    found = []
    if end.get("type") != "error" or end.get("kind") != expect.kind:
        found.append(f"ended with {end} instead of an error of kind {expect.kind}")
    if expect.says not in str(end.get("message")):
        found.append(f"{expect.says!r} not in the error message {end.get('message')!r}")
    if not expect.partial:
        if turn.text:
            found.append(f"text arrived although the case expects none: {turn.text!r}")
        if end.get("restore") != MESSAGE or turn.messages:
            found.append(f"message not restored: {end.get('restore')!r}, {turn.messages}")
        return found
    if not turn.text or end.get("restore") is not None:
        found.append(f"expected text kept: {turn.text!r}, restore {end.get('restore')!r}")
    stored = [(m["role"], m.get("status")) for m in turn.messages]
    if stored != [("user", None), ("assistant", "error")]:
        found.append(f"stored messages {stored}, not the question and an answer marked error")
    elif turn.messages[1]["content"] != turn.text or turn.messages[0]["content"] != MESSAGE:
        found.append("the stored partial answer is not what was streamed")
    elif (turn.messages[1].get("error") or {}).get("kind") != expect.kind:
        found.append(f"stored error {turn.messages[1].get('error')}")
    return found


# --------------------------------------------------------------------------------------------
# The cases


def model_case(*replies: Reply, **env: str) -> Callable[[Stack], Turn]:
    def run(stack: Stack) -> Turn:
        stack.llm.script(*replies)
        return take_turn(stack, **env)

    return run


def refused_model(stack: Stack) -> Turn:
    return take_turn(stack, LLM_BASE_URL=f"{closed_port()}/v1")


def hung_model(stack: Stack) -> Turn:
    with black_hole() as url:
        return take_turn(stack, LLM_BASE_URL=f"{url}/v1", LLM_FIRST_BYTE_TIMEOUT="1")


def searxng_case(mode: str, **env: str) -> Callable[[Stack], Turn]:
    def run(stack: Stack) -> Turn:
        stack.llm.script(SEARCH, SORRY)
        with BrokenSearxng(mode) as broken:
            return take_turn(stack, searxng_url=broken.url, **env)

    return run


def searxng_down(stack: Stack) -> Turn:
    stack.llm.script(SEARCH, SORRY)
    return take_turn(stack, searxng_url=closed_port())


def brave_case(status: int, code: str) -> Callable[[Stack], Turn]:
    def run(stack: Stack) -> Turn:
        stack.llm.script(SEARCH, SORRY)
        stack.brave.fail_next(status, code)
        return take_turn(stack)

    return run


def brave_rate_limited(stack: Stack) -> Turn:
    """Brave's 429 suspends the engine, so it gets a SearXNG of its own. Twice: the
    searcher retries a rate-limited search once, after Brave's delay."""
    stack.llm.script(SEARCH, SORRY)
    stack.brave.fail_next(429, "RATE_LIMITED", times=2)
    with EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(stack.brave)) as own:
        return take_turn(stack, searxng_url=own.url)


def page_case(path: str, **env: str) -> Callable[[Stack], Turn]:
    def run(stack: Stack) -> Turn:
        url = f"{stack.pages.url}{path}"
        fetch = Reply(tool_calls=[ToolCall("web_fetch", {"url": url})])
        stack.llm.script(fetch, Reply(text="I could not read that page."))
        return take_turn(stack, message=f"{MESSAGE}: {url}", **env)  # the user gives it

    return run


def partial(**fault: Any) -> Reply:
    """An answer that fails after two pieces of text."""
    return Reply(text=ANSWER, split=6, **fault)


IDLE = {"LLM_IDLE_TIMEOUT": "1"}
CASES = [
    Case("model: connection refused", refused_model, Expect("network", "cannot reach")),
    Case(
        "model: hung, probes included",
        hung_model,
        Expect("network", "LLM_FIRST_BYTE_TIMEOUT", within=10),
    ),
    Case(
        "model: accepts, never answers",
        model_case(Reply(silent=True), LLM_FIRST_BYTE_TIMEOUT="1"),
        Expect("network", "LLM_FIRST_BYTE_TIMEOUT", within=10),
    ),
    Case(
        "model: headers, then silence",
        model_case(Reply(text=ANSWER, stall_after=0), **IDLE),
        Expect("network", "LLM_IDLE_TIMEOUT", within=10),
    ),
    Case(
        "model: stalls mid-answer",
        model_case(partial(stall_after=2), **IDLE),
        Expect("network", "LLM_IDLE_TIMEOUT", partial=True, within=10),
    ),
    Case("model: 503", model_case(server_error(503)), Expect("upstream", "503")),
    Case(
        "model: chunk not JSON",
        model_case(partial(malformed_after=2)),
        Expect("upstream", "not JSON", partial=True),
    ),
    Case(
        "model: cut mid-event",
        model_case(partial(cut_after=2)),
        Expect("network", "lost the connection", partial=True),
    ),
    Case(
        "model: crash mid-body",
        model_case(partial(break_after=2)),
        Expect("network", "lost the connection", partial=True),
    ),
    Case(
        "model: ends without finish",
        model_case(partial(end_after=2)),
        Expect("network", "no finish_reason", partial=True),
    ),
    Case(
        "model: ends before any text",
        model_case(partial(end_after=0)),
        Expect("network", "no finish_reason"),
    ),
    Case(
        "model: endless stream",
        model_case(Reply(text="more and ", endless=True, chunk_delay=0.01), LLM_TOTAL_TIMEOUT="1"),
        Expect("upstream", "LLM_TOTAL_TIMEOUT", partial=True, within=10),
    ),
    Case("model: bad key", model_case(invalid_api_key()), Expect("auth", "API key")),
    Case("model: rate limited", model_case(rate_limited()), Expect("rate_limit", "rate limited")),
    Case(
        "model: content filter",
        model_case(content_filtered()),
        Expect("content_filter", "refused the content"),
    ),
    Case(
        "model: context overflow",
        model_case(context_length_exceeded(), context_length_exceeded()),
        Expect("context_overflow", "too long"),
    ),
    Case(
        "model: rejects tools, then again",
        # No searches: the search made first for a model without tool calling would be
        # output, and this is a failure before any.
        model_case(tools_unsupported(), tools_unsupported(), WEB_SEARCH_MAX_USES="0"),
        Expect("tools_unsupported", "does not accept tools"),
    ),
    Case("searxng: down", searxng_down, Expect(None, "SearXNG is not reachable")),
    Case(
        "searxng: slow",
        searxng_case("slow", SEARXNG_TIMEOUT="1"),
        Expect(None, "SEARXNG_TIMEOUT", within=8),
    ),
    Case("searxng: HTML, not JSON", searxng_case("html"), Expect(None, "did not answer JSON")),
    Case("searxng: limiter 429", searxng_case("429"), Expect(None, "(429)")),
    Case("searxng: limiter 403", searxng_case("403"), Expect(None, "(403)")),
    Case("brave: 401", brave_case(401, "UNAUTHORIZED"), Expect(None, "UNAUTHORIZED")),
    Case(
        "brave: 422",
        brave_case(422, "SUBSCRIPTION_TOKEN_INVALID"),
        Expect(None, "SUBSCRIPTION_TOKEN_INVALID"),
    ),
    Case("brave: 429", brave_rate_limited, Expect(None, "RATE_LIMITED")),
    Case(
        "page: hangs",
        page_case("/slow?seconds=60", FETCH_TIMEOUT="2"),
        Expect(None, "timed out after 2 s", within=8),
    ),
    Case("page: redirects forever", page_case("/chain/50"), Expect(None, "redirects")),
    Case(
        "page: never ends",
        page_case("/drip?seconds=60", FETCH_TIMEOUT="2"),
        Expect(None, "timed out after 2 s", within=8),
    ),
]


@pytest.fixture
def stack(llm, pages, brave, searxng, tmp_path) -> Stack:
    llm.clear()
    brave.clear()
    return Stack(llm, pages, brave, searxng.url, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_fault_ends_in_its_kind(stack: Stack, case: Case) -> None:
    turn = case.run(stack)
    assert problems(turn, case.expect) == [], turn.events[-3:]


def test_window_probe_of_a_hung_server_is_bounded() -> None:
    """The served-window probe runs before a turn's first request: a hung server costs it
    WINDOW_PROBE_SECONDS (2 s), not the minute of the default first-byte limit."""

    async def probe(url: str) -> tuple[int | None, float]:
        client = ModelClient(f"{url}/v1", limits=Limits())
        started = time.monotonic()
        try:
            return await client.served_window("fake-model"), time.monotonic() - started
        finally:
            await client.aclose()

    # A thread of its own: the session's browser may hold a running loop in this one.
    with black_hole() as url, ThreadPoolExecutor(1) as thread:
        window, seconds = thread.submit(asyncio.run, probe(url)).result()
    assert window is None
    assert 1.5 < seconds < 5
