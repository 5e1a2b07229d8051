"""Research runs (docs/research.md) against a local web on loopback: pages this benchmark
writes, served by a page server of its own; the fake Brave searching them (BM25 over the
corpus, real Brave response shapes, extra snippets and dates) behind a real SearXNG; the
tests' fake model scripted to behave plausibly (a plan of the question, notes copied from
the sentences of a page that share the question's words, a report of the notes, each
citing its source). Per question: status, searches, pages, seconds, tokens, the share of
the report's sentences that cite, the share of the cited sources' notes whose quote the
page holds (grounding: the page as written, not web_fetch's text of it); and the
questions the corpus holds nothing on, which must all end "nothing found".

    .venv/bin/python bench/research.py [--rounds 2]

The figures measure the run's structure and cost, not a model's judgement: the fake's
choices are scripted. Then the same questions as plain answers through /v1 (the service
on the same web and model: one turn with our tools). No real llama-server run here (see
docs/research.md, "Measured")."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import config  # noqa: E402
from app.cli.research import researched  # noqa: E402
from app.research.budget import Budget  # noqa: E402
from app.research.events import ResearchResult  # noqa: E402
from app.research.notes import folded  # noqa: E402
from app.search.embedded import EmbeddedSearxng  # noqa: E402
from bench.common import machine_load, service  # noqa: E402
from tests.conftest import API_KEY, SERVER_LOCALE, chat_env, searxng_env  # noqa: E402
from tests.fakes.brave_api import CorpusPage, FakeBrave  # noqa: E402
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall  # noqa: E402
from tests.fakes.loopback import LoopbackFake, LoopbackHandler  # noqa: E402

STEP = re.compile(r"Research step: (\w+)\.")
WORD = re.compile(r"\w{4,}")
CITED = re.compile(r"\[\d+(?:,\s*\d+)*\][.!?]?$")
HEADER = ("[", "<", "Title:", "URL:")
"""The lines of a page as web_fetch gives it that are ours, not the page's."""
NOTE = re.compile(r'^\[(\d+)\] \(sub-question (\d+)\) "(.*)"$')

PAGES = {
    "pierogi": (
        "How to boil pierogi",
        "Pierogi are filled dumplings from Poland. Fresh pierogi boil for about four minutes "
        "after they float. Frozen pierogi need seven to eight minutes in salted water. "
        "Stir gently so the dumplings do not stick to the pot. Fry boiled pierogi in butter "
        "with onion for a crisp finish.",
    ),
    "sourdough": (
        "Sourdough starter basics",
        "A sourdough starter is flour and water fermented by wild yeast. Feed the starter "
        "every day with equal weights of flour and water. A ripe starter doubles within "
        "six hours at room temperature. Keep a starter in the fridge and feed it weekly "
        "when you bake rarely.",
    ),
    "asyncio": (
        "Python asyncio event loop",
        "Asyncio runs coroutines on a single event loop thread. A coroutine that blocks "
        "stops every other task on the event loop. Use asyncio.to_thread for blocking "
        "calls such as file reads. The event loop schedules callbacks in the order they "
        "become ready.",
    ),
    "tatra": (
        "Hiking in the Tatra mountains",
        "The Tatra mountains lie on the border of Poland and Slovakia. Rysy is the highest "
        "peak reachable from Poland at 2499 metres. The trail to Morskie Oko is paved and "
        "takes about two hours. Bears live in the Tatra national park, so food must not "
        "be left out.",
    ),
    "bicycle": (
        "Bicycle chain care",
        "A bicycle chain should be cleaned and lubricated every few hundred kilometres. "
        "A stretched chain wears the cassette and the chainrings. Measure chain stretch "
        "with a chain checker tool. Replace the chain when it has stretched by half a "
        "percent.",
    ),
}
ANSWERABLE = [
    "How long do frozen pierogi boil?",
    "How often should a sourdough starter be fed?",
    "Why does a blocking coroutine stall the asyncio event loop?",
    "When should a stretched bicycle chain be replaced?",
]
NOTHING_THERE = [
    "Which telescope discovered Neptune's moon Triton?",
    "What is the melting point of tungsten?",
]


class _CorpusHandler(LoopbackHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        page = PAGES.get(self.path.strip("/"))
        if page is None:
            self.send_error(404)
            return
        title, text = page
        body = (
            f"<!doctype html><html><head><title>{title}</title></head><body><article>"
            f"<h1>{title}</h1><p>{text}</p></article></body></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class CorpusServer(LoopbackFake):
    """The local web: each page of PAGES at /NAME."""

    _handler_class = _CorpusHandler
    _thread_name = "corpus"

    def __init__(self) -> None:
        super().__init__()
        self.host = ""

    def _serving_at(self, host: str, port: int) -> str:
        self.host = f"{host}:{port}"
        return f"http://{self.host}"


def words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


def plausible(body: dict[str, Any]) -> Reply:
    """The fake model's answer to each step, from what the step's request holds."""
    messages = body["messages"]
    step = STEP.search(messages[0]["content"])
    name = step[1] if step else ""
    user = messages[-1]["content"]
    if name == "plan":
        sub = {"question": user, "queries": [{"query": user.rstrip("?"), "english": True}]}
        return Reply(text=json.dumps({"subquestions": [sub]}))
    if name == "notes":
        asked = words(user.split("\n\nSub-questions:")[0])
        page = user.split("The page:\n", 1)[-1].splitlines()
        text = " ".join(line for line in page if not line.startswith(HEADER))
        sentences = re.split(r"(?<=[.!?])\s+", text)
        quotes = [s.strip() for s in sentences if len(asked & words(s)) >= 2][:3]
        notes = [{"subquestion": 1, "quote": q} for q in quotes]
        return Reply(text=json.dumps({"notes": notes}))
    if name == "reflect":
        return Reply(text=json.dumps({"answered": [1], "queries": []}))
    if name == "report":
        lines = [NOTE.match(line) for line in user.split("Notes:\n", 1)[-1].splitlines()]
        said = [f"{m[3].rstrip('.')} [{m[1]}]." for m in lines if m]
        return Reply(text=" ".join(said))
    return plain_turn(messages)


def plain_turn(messages: list[dict[str, Any]]) -> Reply:
    """A chat turn with our tools, as a small model takes one: a search of the question,
    the first result of the local web read, its sentences sharing the question's words
    said with the page's number."""
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    last = messages[-1]
    if last["role"] != "tool":
        return Reply(tool_calls=[ToolCall("web_search", {"query": question.rstrip("?")})])
    if last["content"].startswith("Results for"):
        local = re.findall(r"http://127\.0\.0\.1:\d+/\w+", last["content"])
        if not local:
            return Reply(text="The search found nothing on this.")
        return Reply(tool_calls=[ToolCall("web_fetch", {"url": local[0]})])
    number = re.match(r"\[(\d+)\]", last["content"])
    lines = last["content"].splitlines()
    text = " ".join(line for line in lines if not line.startswith(HEADER))
    asked = words(question)
    said = [s for s in re.split(r"(?<=[.!?])\s+", text) if len(asked & words(s)) >= 2][:3]
    cite = f" [{number[1]}]" if number else ""
    answer = " ".join(f"{s.rstrip('.')}{cite}." for s in said)
    return Reply(text=answer or "The page does not say.")


@dataclass
class Measured:
    question: str
    status: str
    searches: int
    cached: int | None
    """Searches the cache answered (unknown for /v1: its lines do not say)."""
    pages: int
    seconds: float
    tokens: int
    citing: float | None
    grounded: float | None


def measured(question: str, result: ResearchResult) -> Measured:
    """The run's spending, its report's sentences that cite, its citations grounded."""
    body = result.report.split("\n## ")[0]
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", body.strip()) if s and s[0] != "*"]
    citing = sum(bool(CITED.search(s)) for s in sentences) / len(sentences) if sentences else None
    by_source = {s["n"]: s["url"] for s in result.sources}
    cited = {int(n) for n in re.findall(r"\d+", " ".join(re.findall(r"\[[\d, ]+\]", body)))}
    checks = []
    for note in (n for n in result.notes if n.source in cited):
        name = by_source[note.source].rsplit("/", 1)[-1]
        title, text = PAGES[name]
        checks.append(folded(note.quote) in folded(f"{title} {text}"))
    spent = result.spent
    return Measured(
        question,
        result.status,
        spent.searches,
        spent.searches_cached,
        spent.pages,
        spent.seconds,
        spent.tokens,
        citing,
        sum(checks) / len(checks) if checks else None,
    )


def answered(http: httpx.Client, question: str) -> Measured:
    """A plain answer through /v1: one turn with our tools; its searches and pages read
    from its activity lines, its citations grounded when the cited page says the sentence."""
    body = {"model": "fake-model", "messages": [{"role": "user", "content": question}]}
    started = time.monotonic()
    answer = http.post("/v1/chat/completions", json=body, timeout=120).json()
    seconds = time.monotonic() - started
    message = answer["choices"][0]["message"]
    activity = message.get("reasoning_content", "")
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", message["content"].strip()) if s]
    cited = [s for s in sentences if CITED.search(s)]
    pages = {a["url_citation"]["url"].rsplit("/", 1)[-1] for a in message["annotations"]}
    grounded = [
        any(folded(CITED.sub("", s).strip()) in folded(PAGES[p][1]) for p in pages if p in PAGES)
        for s in cited
    ]
    usage = answer.get("usage") or {}
    return Measured(
        question,
        "answered" if cited else "uncited",
        activity.count("Searched "),
        None,
        activity.count("Read "),
        seconds,
        usage.get("total_tokens", 0),
        len(cited) / len(sentences) if sentences else None,
        sum(grounded) / len(grounded) if grounded else None,
    )


def table(title: str, rows: list[Measured]) -> None:
    print(f"\n{title}\n")
    print("| question | status | searches (cached) | pages | s | tokens | citing | grounded |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.question} | {r.status} | {r.searches} ({'-' if r.cached is None else r.cached})"
            f" | {r.pages} | "
            f"{r.seconds:.1f} | {r.tokens:,} | {share(r.citing)} | {share(r.grounded)} |"
        )


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each question (2)")
    args = parser.parse_args()
    with (
        FakeLLM() as llm,
        FakeBrave(api_key=API_KEY) as brave,
        CorpusServer() as web,
        EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as searxng,
        tempfile.TemporaryDirectory() as scratch,
    ):
        llm.default = Reply(reply_to=plausible)
        brave.corpus = tuple(
            CorpusPage(f"{web.url}/{name}", title, text, day="2025-06-01")
            for name, (title, text) in PAGES.items()
        )
        env = chat_env(llm, Path(scratch), FETCH_ALLOW_HOSTS=web.host, SEARCH_RATE="50")
        settings = config.load({**env, "SEARXNG_URL": searxng.url})
        questions = [q for _ in range(args.rounds) for q in ANSWERABLE + NOTHING_THERE]
        rows = [
            measured(q, asyncio.run(researched(q, Budget(), "en-US", searxng.url, settings)))
            for q in questions
        ]
        with service({**env, "SEARXNG_URL": searxng.url}) as served:
            with httpx.Client(base_url=served.url) as http:
                plain = [answered(http, q) for q in questions]
    print(f"load: {machine_load()}")
    table("Research:", rows)
    table("A plain answer through /v1 (one turn with our tools):", plain)
    empty = [r for r in rows if r.question in NOTHING_THERE]
    found = sum(r.status == "nothing_found" for r in empty)
    print(f"\nnothing found where the corpus holds nothing: {found} of {len(empty)} runs")


if __name__ == "__main__":
    main()
