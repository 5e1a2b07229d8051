"""A model that researches as a test scripts it: it answers each step of a research run
(app/research/: the plan, a page's notes, the reflection, the report) by the step its
request names, so a test sets what each step says and not the order of the requests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.browser import opened
from tests.conftest import ChatService, chat_env, service_for
from tests.fakes.brave_api import FakeBrave
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.pages import PageServer
from tests.page_actions import turns_ended
from tests.resolving import resolve_everything_privately

STEP = re.compile(r"Research step: (\w+)\.")
QUESTION = "How long do pierogi boil?"
ARTICLE_QUOTE = "Pierogi are filled dumplings"
"""Words of the page server's /article, as a note quotes them."""


def plan_of(*queries: str, english: bool = False) -> dict[str, Any]:
    """A plan of one sub-question per query."""
    return {
        "subquestions": [
            {"question": f"What about {q}?", "queries": [{"query": q, "english": english}]}
            for q in queries
        ]
    }


def all_answered(round_: int) -> dict[str, Any]:
    return {"answered": [1], "queries": []}


@dataclass
class ScriptedResearcher:
    plan: dict[str, Any] = field(default_factory=lambda: plan_of("pierogi boiling time"))
    quotes: list[str] = field(default_factory=lambda: [ARTICLE_QUOTE])
    """Quoted from a page that holds them, for sub-question 1."""
    unnoted: str | None = None
    """A page whose text holds this gets no note."""
    invented: list[str] = field(default_factory=list)
    """Quoted from every page, though no page says them."""
    reflect: Callable[[int], dict[str, Any]] = all_answered
    """The reflection after round n (from 1)."""
    report: str = "Pierogi are filled dumplings [1]. They boil for four minutes [1]."
    garbage: dict[str, str] = field(default_factory=dict)
    """Steps answered with this text instead of their JSON."""
    prose: bool = False
    """The JSON inside words and a code fence, as a model without JSON mode writes it."""
    slow: dict[str, float] = field(default_factory=dict)
    """Seconds a step's answer takes to come, all at once (a long prompt on a slow CPU)."""
    silent: set[str] = field(default_factory=set)
    """Steps the model never answers (a server stuck on them)."""
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    """The usage each step's answers report (default: the fake's estimate)."""
    asked: list[str] = field(default_factory=list)
    """The steps asked, in order."""

    def reply(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or [{}]
        step = STEP.search(str(messages[0].get("content") or ""))
        name = step[1] if step else "none"
        self.asked.append(name)
        if name in self.silent:
            return Reply(silent=True)
        reply = self.answer(name, messages)
        reply.usage = self.usage.get(name)
        if name in self.slow:  # one delta, paced: the whole answer after that long
            reply.split, reply.chunk_delay = len(str(reply.text)) or 1, self.slow[name]
        return reply

    def answer(self, name: str, messages: list[dict[str, Any]]) -> Reply:
        if name in self.garbage:
            return Reply(text=self.garbage[name])
        if name == "report":
            return Reply(text=self.report)
        if name == "plan":
            return self.structured(self.plan)
        if name == "notes":
            page = str(messages[-1].get("content") or "")
            quoted = [q for q in self.quotes if q in page] + self.invented
            if self.unnoted is not None and self.unnoted in page:
                quoted = []
            notes = [{"subquestion": 1, "quote": q} for q in quoted]
            return self.structured({"notes": notes})
        if name == "reflect":
            return self.structured(self.reflect(self.asked.count("reflect")))
        return Reply(text="OK")

    def structured(self, value: dict[str, Any]) -> Reply:
        text = json.dumps(value)
        if self.prose:
            return Reply(text=f"Here it is:\n```json\n{text}\n```\nAnything else?")
        return Reply(text=text)


def scripted_on(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> ScriptedResearcher:
    """The fake model server answering every request as a ScriptedResearcher."""
    llm.clear()
    scripted = ScriptedResearcher()
    monkeypatch.setattr(llm, "default", Reply(reply_to=scripted.reply))
    return scripted


def article_first(brave: FakeBrave, pages: PageServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every search's first result is the page server's article; in this process every
    other name resolves privately, so only the page server is read."""
    resolve_everything_privately(monkeypatch)
    url = f"{pages.url}/article"
    monkeypatch.setattr(brave, "first_result", {"url": url, "title": "Pierogi, step by step"})
    return url


@contextmanager
def research_service(
    request: pytest.FixtureRequest,
    llm: FakeLLM,
    pages: PageServer,
    searxng_url: str,
    tmp: Path,
    **extra: str,
) -> Iterator[ChatService]:
    """The chat service, its searches unpaced (a research makes several), with `extra`
    settings."""
    llm.clear()
    env = chat_env(llm, tmp, pages, SEARCH_RATE="50", **extra)
    with service_for(request, env, searxng_url) as started:
        yield started


@contextmanager
def research_page(
    browser: Any, service: ChatService, *, pause: float, **options: Any
) -> Iterator[Any]:
    """The service's page (`opened` with its keyword arguments), its research plans starting
    by themselves after `pause` seconds (0: only on Start), as the Settings field keeps it."""
    with opened(browser, service.url, **options) as page:
        page.evaluate(f"localStorage.setItem('research-plan-seconds', '{pause}')")
        page.ended_before = turns_ended(page)
        yield page


# The fixtures of the research test modules, imported by each (a module may define its
# own `researcher` instead, as the page's does).


@pytest.fixture
def researcher(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> ScriptedResearcher:
    return scripted_on(llm, monkeypatch)


@pytest.fixture
def article(brave: FakeBrave, pages: PageServer, monkeypatch: pytest.MonkeyPatch) -> str:
    return article_first(brave, pages, monkeypatch)


@pytest.fixture
def service(
    request: pytest.FixtureRequest,
    llm: FakeLLM,
    pages: PageServer,
    searxng: Any,
    brave: FakeBrave,
    tmp_path: Path,
) -> Iterator[ChatService]:
    """The research chat service on the session's SearXNG."""
    with research_service(request, llm, pages, searxng.url, tmp_path) as started:
        yield started
