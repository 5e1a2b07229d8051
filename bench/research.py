"""Research runs (docs/research.md) against a local web on loopback, compared with plain
answers on the same web and model.

The local web: the extraction corpora of ../shared (`corpus/extraction` and
`corpus/extraction-multilingual`: 135 real pages in 20 languages, read where they lie,
copied nowhere) when present, else five pages this benchmark writes (`--web written`
picks them). Either is served by bench.common's LocalPages; the fake Brave searches it
(BM25 over each page's text, real Brave response shapes, extra snippets) behind a real
SearXNG. The model: the tests' fake scripted to behave plausibly (a plan of the question,
notes copied from the sentences of a page that share the question's words, a report of
the notes, each citing its source), or with `--model llama` the tests' real llama-server
(Gemma 3 270M, tests/llama_server.py builds and caches it; its answers mean nothing, the
run's structure and cost are what is measured).

Per question: status, searches, pages, seconds, tokens, the share of the report's
sentences that cite, the share of the cited sources' notes whose quote the page holds
(grounding: the text of the page as served, not web_fetch's text of it); and the questions
the web holds nothing on, which must all end "nothing found". Then the same questions as
plain answers through /v1 (the service on the same web and model: one turn with our
tools).

    .venv/bin/python bench/research.py [--rounds 2] [--web shared|written] [--model fake|llama]
                                       [--answerable N] [--corpora ../shared/corpus]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import html
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import lxml.html

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import config  # noqa: E402
from app.cli.research import researched  # noqa: E402
from app.research.budget import Budget  # noqa: E402
from app.research.events import ResearchResult  # noqa: E402
from app.research.notes import folded  # noqa: E402
from app.search.embedded import EmbeddedSearxng  # noqa: E402
from bench.common import LocalPages, machine_load, service  # noqa: E402
from tests.conftest import API_KEY, SERVER_LOCALE, SHARED, chat_env, searxng_env  # noqa: E402
from tests.fakes.brave_api import CorpusPage, FakeBrave  # noqa: E402
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall  # noqa: E402
from tests.llama_server import MODEL_ALIAS, LlamaServer, ensure_built  # noqa: E402

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
CORPORA = SHARED / "corpus"
SHARED_PARTS = ("extraction", "extraction-multilingual/human", "extraction-multilingual/reviewed")
SHARED_ANSWERABLE = [  # each answered by one or two pages of corpus/extraction
    "How many Boeing 787 Dreamliner jets did Emirates order?",
    "What did Hubble find about the water vapor plumes of Europa?",
    "Why did Sweden drop the Julian Assange investigation?",
    "How many people did PG&E shut off power to in California?",
    "How did a feather duvet damage a man's lungs?",
]
SHARED_NOTHING_THERE = [  # no page of the corpora names tungsten or pierogi
    "What is the melting point of tungsten?",
    "How long do frozen pierogi boil?",
]
UTF8 = lxml.html.HTMLParser(encoding="utf-8")
"""Every page of both webs is UTF-8 (and served so); lxml would read bytes without a
charset of their own as Latin-1."""
TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.S | re.I)


@dataclass
class WebPage:
    path: str
    title: str
    text: str
    """What the fake Brave searches: the page's main text."""
    html: bytes
    lang: str = "en"


@dataclass
class Web:
    name: str
    pages: list[WebPage]
    answerable: list[str]
    nothing_there: list[str]
    served: dict[str, str] = field(default_factory=dict)
    """Each page's address and its text as served (every text node of its HTML): what a
    quote is checked against."""

    @contextmanager
    def serving(self) -> Iterator[LocalPages]:
        with LocalPages({page.path: page.html for page in self.pages}) as local:
            for page in self.pages:
                document = lxml.html.fromstring(page.html, parser=UTF8)
                self.served[f"{local.url}{page.path}"] = f"{page.title} {document.text_content()}"
            yield local

    def corpus(self, base: str) -> tuple[CorpusPage, ...]:
        return tuple(
            CorpusPage(f"{base}{page.path}", page.title, page.text, page.lang, day="2025-06-01")
            for page in self.pages
        )


def written_web() -> Web:
    """The five pages this benchmark writes."""
    pages = [
        WebPage(f"/{name}", title, text, written_html(title, text))
        for name, (title, text) in PAGES.items()
    ]
    return Web("written", pages, ANSWERABLE, NOTHING_THERE)


def written_html(title: str, text: str) -> bytes:
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body><article>"
        f"<h1>{title}</h1><p>{text}</p></article></body></html>"
    ).encode()


def shared_web(corpora: Path) -> Web | None:
    """The extraction corpora of ../shared as they lie (read, not copied); None when absent."""
    if not all((corpora / part / "ground-truth.json").exists() for part in SHARED_PARTS):
        return None
    pages = []
    for part in SHARED_PARTS:
        truth = json.loads((corpora / part / "ground-truth.json").read_text())
        for name, page in sorted(truth.items()):
            served = gzip.decompress((corpora / part / "html" / f"{name}.html.gz").read_bytes())
            title = TITLE.search(served.decode("utf-8", "replace"))
            body = page["articleBody"]
            named = html.unescape(title[1]).strip() if title else body[:60]
            lang = page.get("lang") or "en"
            pages.append(WebPage(f"/{part.rsplit('/', 1)[-1]}/{name}", named, body, served, lang))
    return Web("shared", pages, SHARED_ANSWERABLE, SHARED_NOTHING_THERE)


ASKING = {"what", "which", "when", "where", "does", "should", "many", "much", "with", "that"}
ASKING |= {"this", "from", "have", "there", "their", "they", "were", "been", "about", "into"}
"""Words a question shares with any page: two of them made a note of an unrelated sentence
("What ... point" for the melting point of tungsten)."""


def words(text: str) -> set[str]:
    """The words a sentence shares with a question to be a note of it, for the fake."""
    return {w.lower() for w in WORD.findall(text)} - ASKING


def sentences(page: str) -> list[str]:
    """The sentences of a page as web_fetch gives it, each within its paragraph (a quote
    across two is one no page holds), without our lines around the page's text."""
    lines = [line for line in page.splitlines() if line.strip() and not line.startswith(HEADER)]
    return [s.strip() for line in lines for s in re.split(r"(?<=[.!?])\s+", line) if s.strip()]


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
        page = user.split("The page:\n", 1)[-1]
        quotes = [s for s in sentences(page) if len(asked & words(s)) >= 2][:3]
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
        local = re.findall(r"http://127\.0\.0\.1:\d+/[\w/-]+", last["content"])
        if not local:
            return Reply(text="The search found nothing on this.")
        return Reply(tool_calls=[ToolCall("web_fetch", {"url": local[0]})])
    number = re.match(r"\[(\d+)\]", last["content"])
    asked = words(question)
    said = [s for s in sentences(last["content"]) if len(asked & words(s)) >= 2][:3]
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


def measured(question: str, result: ResearchResult, served: dict[str, str]) -> Measured:
    """The run's spending, its report's sentences that cite, its citations grounded in the
    pages as served."""
    body = result.report.split("\n## ")[0]
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", body.strip()) if s and s[0] != "*"]
    citing = sum(bool(CITED.search(s)) for s in sentences) / len(sentences) if sentences else None
    by_source = {s["n"]: s["url"] for s in result.sources}
    cited = {int(n) for n in re.findall(r"\d+", " ".join(re.findall(r"\[[\d, ]+\]", body)))}
    checks = [
        folded(note.quote) in folded(served.get(by_source[note.source], ""))
        for note in result.notes
        if note.source in cited
    ]
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


def answered(http: httpx.Client, model: str, question: str, served: dict[str, str]) -> Measured:
    """A plain answer through /v1: one turn with our tools; its searches and pages read
    from its activity lines, its citations grounded when a cited page says the sentence."""
    body = {"model": model, "messages": [{"role": "user", "content": question}]}
    started = time.monotonic()
    answer = http.post("/v1/chat/completions", json=body, timeout=900).json()
    seconds = time.monotonic() - started
    if "choices" not in answer:  # the service's error, in OpenAI's shape
        failed = f"failed: {answer.get('error', {}).get('message', answer)}"[:120]
        return Measured(question, failed, 0, None, 0, seconds, 0, None, None)
    message = answer["choices"][0]["message"]
    activity = message.get("reasoning_content") or ""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", (message["content"] or "").strip()) if s]
    cited = [s for s in sentences if CITED.search(s)]
    pages = {a["url_citation"]["url"] for a in message.get("annotations") or []}
    grounded = [
        any(folded(CITED.sub("", s).strip()) in folded(served.get(p, "")) for p in pages)
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


def cells(r: Measured) -> str:
    cached = "-" if r.cached is None else r.cached
    return (
        f"{r.status}, {r.searches} ({cached}), {r.pages}, {r.seconds:.1f} s, {r.tokens:,}, "
        f"{share(r.citing)}, {share(r.grounded)}"
    )


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


@dataclass
class Model:
    name: str
    env: dict[str, str]
    """LLM_BASE_URL and the model settings of the service and the command."""
    budget: Budget


LLAMA_BUDGET = Budget(searches=2, pages=3, minutes=10)
"""Smaller than the default: Gemma 3 270M on one thread of a shared core takes seconds
a step, and what is measured is the run's structure, not how far it gets."""


@contextmanager
def model_server(kind: str, scratch: Path) -> Iterator[Model]:
    """The fake model scripted to behave plausibly, or the tests' real llama-server."""
    with ExitStack() as stack:
        if kind == "fake":
            llm = stack.enter_context(FakeLLM())
            llm.default = Reply(reply_to=plausible)
            yield Model("fake-model", chat_env(llm, scratch), Budget())
            return
        binary, gguf = ensure_built()
        llama = stack.enter_context(LlamaServer(binary, gguf, 8192, scratch / "llama.log"))
        settings = {
            "MODELS": MODEL_ALIAS,
            "DEFAULT_MODEL": MODEL_ALIAS,
            "SUMMARY_MODEL": MODEL_ALIAS,
            "MAX_COMPLETION_TOKENS": "512",
            "MODEL_PARAMS": json.dumps({MODEL_ALIAS: {"temperature": 0}}),  # greedy: replayable
        }
        yield Model(MODEL_ALIAS, chat_env(llama, scratch, **settings), LLAMA_BUDGET)


def chosen_web(name: str, corpora: Path) -> Web:
    if name == "written":
        return written_web()
    web = shared_web(corpora)
    if web is None:
        print(f"skipped: the shared extraction corpora are absent ({corpora}/extraction*);")
        print("measured on the five pages this benchmark writes instead")
        return written_web()
    return web


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each question (2)")
    parser.add_argument("--web", choices=("shared", "written"), default="shared")
    parser.add_argument("--model", choices=("fake", "llama"), default="fake")
    parser.add_argument(
        "--answerable", type=int, default=None, help="only the first N questions the web answers"
    )
    parser.add_argument(
        "--corpora", type=Path, default=CORPORA, help=f"where the shared corpora lie ({CORPORA})"
    )
    args = parser.parse_args()
    web = chosen_web(args.web, args.corpora)
    with (
        tempfile.TemporaryDirectory() as scratch,
        model_server(args.model, Path(scratch)) as model,
        FakeBrave(api_key=API_KEY) as brave,
        web.serving() as local,
        EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as searxng,
    ):
        brave.corpus = web.corpus(local.url)
        env = {**model.env, "FETCH_ALLOW_HOSTS": local.host, "SEARCH_RATE": "50"}
        env["SEARXNG_URL"] = searxng.url
        settings = config.load(env)
        answerable = web.answerable[: args.answerable]
        questions = [q for _ in range(args.rounds) for q in answerable + web.nothing_there]
        print(f"{machine_load()}; web: {web.name} ({len(web.pages)} pages); model: {model.name}")
        print("\n| question | research | a plain answer through /v1 (one turn with our tools) |")
        print("|---|---|---|")
        empty = []
        with service(env) as running, httpx.Client(base_url=running.url) as http:
            for q in questions:  # each line as it is measured: a slow model's run is long
                result = asyncio.run(researched(q, model.budget, "en-US", searxng.url, settings))
                row = measured(q, result, web.served)
                plain = answered(http, model.name, q, web.served)
                print(f"| {q} | {cells(row)} | {cells(plain)} |", flush=True)
                if q in web.nothing_there:
                    empty.append(row.status == "nothing_found")
    print("\neach: status, searches (from the cache), pages, seconds, tokens, citing, grounded")
    print(f"{machine_load()}")
    print(f"nothing found where the corpus holds nothing: {sum(empty)} of {len(empty)} runs")


if __name__ == "__main__":
    main()
