"""Web search + fetch against Brave's LLM Context, on the research benchmark's local web
(bench/research.py: its pages on a loopback server, the fake Brave searching them behind a
real SearXNG). The same questions answered in a conversation of the page's API twice: with
our web engine (`braveweb`: results, then the first local page read by web_fetch) and with
LLM Context (`bravellm`: the passages come with the results; nothing is fetched). The fake
model answers from what it was given, citing it. Per answer: the tokens the search's result
took in the prompt, pages fetched from this network, Brave requests, seconds.

    .venv/bin/python bench/llm_context.py [--rounds 3]

The pages are on loopback, so a fetch here costs a few milliseconds, not the 0.3 to 2 s of
a real page: the seconds measure our side only (docs/performance.md says what to add)."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.chat.context import estimate_tokens  # noqa: E402
from app.search.embedded import EmbeddedSearxng  # noqa: E402
from bench.common import chat_turn, client, machine_load, new_conversation, service  # noqa: E402
from bench.research import ANSWERABLE, PAGES, CorpusServer, _CorpusHandler, words  # noqa: E402
from tests.conftest import API_KEY, SERVER_LOCALE, chat_env, searxng_env  # noqa: E402
from tests.fakes.brave_api import CONTEXT_PATH, CorpusPage, FakeBrave  # noqa: E402
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall  # noqa: E402

SOURCES = {"web search + fetch": "braveweb", "LLM Context": "bravellm"}
LOCAL = re.compile(r"http://127\.0\.0\.1:\d+/\w+")


class _CountingHandler(_CorpusHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.server.fake.fetched += 1
        super().do_GET()


class CountingWeb(CorpusServer):
    """The local web, counting the pages this network fetched from it."""

    _handler_class = _CountingHandler

    def __init__(self) -> None:
        super().__init__()
        self.fetched = 0


def answer_from(text: str, question: str, number: str) -> Reply:
    asked = words(question)
    sentences = re.split(r"(?<=[.!?])\s+|\n¶ ", text)
    said = [s.strip() for s in sentences if len(asked & words(s)) >= 2][:3]
    return Reply(text=" ".join(f"{s.rstrip('.')} [{number}]." for s in said) or "Not said.")


def turn(body: dict[str, Any]) -> Reply:
    """A small model's turn: search the question; with passages in the results, answer
    from them; else read the first local result, then answer from the page."""
    messages = body["messages"]
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    last = messages[-1]
    if last["role"] != "tool":
        return Reply(tool_calls=[ToolCall("web_search", {"query": question.rstrip("?")})])
    if last["content"].startswith("Results for") and "\n¶ " not in last["content"]:
        local = LOCAL.findall(last["content"])
        if local:
            return Reply(tool_calls=[ToolCall("web_fetch", {"url": local[0]})])
    return answer_from(last["content"], question, "1")


@dataclass
class Row:
    source: str
    search_tokens: int
    tool_tokens: int
    """The search's result and the page read, as the model got them."""
    fetched: int
    brave_requests: int
    seconds: float


async def answered(url: str, engines: str, question: str, web: CountingWeb, brave, llm) -> Row:
    async with client() as http:
        conversation = await new_conversation(http, url, search_engines=engines)
        before = (web.fetched, len(brave.requests), len(llm.requests))
        done = await chat_turn(http, url, conversation, question)
    tools = [
        m["content"]
        for r in llm.requests[before[2] :]
        for m in r.body["messages"][-1:]
        if m["role"] == "tool"
    ]
    searches = [text for text in tools if text.startswith("Results for")]
    return Row(
        engines,
        estimate_tokens(searches[0]) if searches else 0,
        sum(map(estimate_tokens, tools)),
        web.fetched - before[0],
        len(brave.requests) - before[1],
        done.done or 0.0,
    )


def summary(rows: list[Row]) -> None:
    print(
        "| source | answers | tokens: the search's result | tokens: all tool results "
        "| pages fetched from here | Brave requests | seconds (median) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, engine in SOURCES.items():
        mine = [r for r in rows if r.source == engine]
        seconds = sorted(r.seconds for r in mine)[len(mine) // 2]
        print(
            f"| {name} | {len(mine)} | {sum(r.search_tokens for r in mine) / len(mine):,.0f} | "
            f"{sum(r.tool_tokens for r in mine) / len(mine):,.0f} | "
            f"{sum(r.fetched for r in mine) / len(mine):.1f} | "
            f"{sum(r.brave_requests for r in mine) / len(mine):.1f} | {seconds:.3f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="answers of each question (3)")
    args = parser.parse_args()
    with (
        FakeLLM() as llm,
        FakeBrave(api_key=API_KEY) as brave,
        CountingWeb() as web,
        EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as searxng,
        tempfile.TemporaryDirectory() as scratch,
    ):
        llm.default = Reply(reply_to=turn)
        brave.corpus = tuple(
            CorpusPage(f"{web.url}/{name}", title, text, day="2025-06-01")
            for name, (title, text) in PAGES.items()
        )
        env = chat_env(llm, Path(scratch), FETCH_ALLOW_HOSTS=web.host, SEARCH_RATE="50")
        # No cache: each answer spends its own search, as a new question would.
        env |= {"SEARXNG_URL": searxng.url, "SEARCH_CACHE_TTL": "0"}
        with service(env) as served:
            rows = [
                asyncio.run(answered(served.url, engine, q, web, brave, llm))
                for _ in range(args.rounds)
                for q in ANSWERABLE
                for engine in SOURCES.values()
            ]
    contexts = sum(r.path == CONTEXT_PATH for r in brave.requests)
    print(f"load: {machine_load()}; LLM Context requests: {contexts}")
    summary(rows)


if __name__ == "__main__":
    main()
