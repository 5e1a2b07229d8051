"""Both of our Brave engines on by default (web search and LLM Context, as a user sets them
in searxng/settings.yml): a search that names no engine sends Brave two queries, and is
counted, priced and paced as two, in a real SearXNG on the fake Brave API."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing

import pytest
from playwright.sync_api import expect

from tests.browser import opened
from tests.chat_client import done, get_conversation, new_conversation, numbered, send
from tests.conftest import ChatService, chat_env, run_main, service_for
from tests.fakes.brave_api import CONTEXT_PATH, SEARCH_PATH
from tests.fakes.llm_server import Reply, ToolCall
from tests.page_actions import send as type_and_send
from tests.page_actions import wait_turn_end
from tests.research_model import QUESTION, article, research_service, researcher
from tests.searxng_defaults import searching_with

BOTH = ("braveweb", "bravellm")

__all__ = ["researcher", "article"]  # fixtures, imported to be used here


@pytest.fixture
def both(brave, tmp_path) -> Iterator:
    """A SearXNG whose default engines are both of ours."""
    with searching_with(brave, tmp_path / "searxng", *BOTH) as instance:
        yield instance


@pytest.fixture
def chat(request, llm, both, tmp_path) -> Iterator[ChatService]:
    """The service on that SearXNG, at Brave's free plan's pace and the Search plan's price
    (5 $ per 1,000 queries)."""
    with service_for(request, chat_env(llm, tmp_path, SEARCH_RATE="1"), both.url) as service:
        yield service


def lab_search(chat: ChatService, q: str) -> dict:
    answer = chat.http.get("/api/lab/search", params={"q": q, "fresh": "true"}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_lab_prices_a_search_as_the_two_queries_it_sent(chat, brave):
    assert lab_search(chat, "rust ownership")["cost"] == 0.010
    assert sorted(r.path for r in brave.requests) == sorted([SEARCH_PATH, CONTEXT_PATH])
    status = chat.http.get("/api/status", params={"quick": "1"}, timeout=30).json()
    [plan] = [check for check in status["checks"] if check["id"] == "brave_plan"]
    assert "sent 2 today, 2 this month (about 0.010 $ today" in plan["detail"]
    again = chat.http.get("/api/lab/search", params={"q": "rust ownership"}, timeout=60)
    assert again.json()["cost"] == 0.0  # the cache answered: nothing sent
    assert len(brave.requests) == 2


def test_the_answer_keeps_the_queries_its_search_spent(chat, llm, brave):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "rust ownership"})]),
        Reply(tool_calls=[ToolCall("web_search", {"query": "rust ownership"})]),
        Reply(text="Ownership."),
    )
    conversation = new_conversation(chat)
    events = send(chat, conversation, "What is ownership in Rust?")
    assert done(events)["status"] == "complete"
    told = [e["queries"] for e in events if e["type"] == "search" and not e.get("repeated")]
    assert told == [2]  # as the page is sent it
    [answer] = [m for m in get_conversation(chat, conversation)["messages"] if m["role"] != "user"]
    # Stored with it; the page counts the repeat as nothing (its result was given again).
    steps = [(step["queries"], step.get("repeated", False)) for step in answer["activity"]]
    assert steps == [(2, False), (2, True)]
    assert len(brave.requests) == 2


def test_the_governor_paces_the_queries_not_the_searches(chat, brave):
    lab_search(chat, "first search")
    lab_search(chat, "second search")
    first = [r.at for r in brave.requests if "first" in r.params.get("q", "")]
    second = [r.at for r in brave.requests if "second" in r.params.get("q", "")]
    assert len(first) == len(second) == 2
    # At one query a second, a search of two leaves two seconds before the next one's.
    assert min(second) - max(first) >= 2.0, (first, second)


def test_the_research_plan_and_dry_run_count_two_queries_a_search(both, llm, tmp_path):
    settings = dict(searxng_url=both.url, LLM_BASE_URL=llm.api_base, BRAVE_PRICE_PER_1000="5")
    run = run_main("research", QUESTION, "--dry-run", "--max-searches", "12", **settings)
    assert run.returncode == 0, run.stderr
    assert "at most 12, 24 Brave queries (2 a search" in run.stdout
    assert "about 0.120 $ at 5 $ per 1,000 queries" in run.stdout
    as_json = run_main(
        "research", QUESTION, "--dry-run", "--json", "--max-searches", "12", **settings
    )
    shown = json.loads(as_json.stdout)
    assert (shown["queries"], shown["cost"]) == (24, 0.12)


def test_the_research_plan_counts_two_queries_a_search(
    request, llm, pages, both, tmp_path, researcher, article
):
    with research_service(request, llm, pages, both.url, tmp_path) as service:
        body = {"message": QUESTION, "research": {"plan_seconds": 0.1, "searches": 3}}
        path = f"/api/conversations/{new_conversation(service)}/chat"
        with service.http.stream("POST", path, json=body) as response:
            events = [event for _, event in numbered(response)]
    plan = next(event for event in events if event["type"] == "research_plan")
    assert (plan["max_queries"], plan["max_cost"]) == (6, pytest.approx(0.030))
    spent = events[-1]["research"]["spent"]  # the report's figures price what it sent
    assert spent["queries"] == 2 * (spent["searches"] - spent["searches_cached"]) > 0


def test_the_plan_card_says_the_queries_and_their_price(
    request, browser, llm, pages, both, tmp_path, researcher
):
    settings = dict(RESEARCH_SEARCHES="3")
    with research_service(request, llm, pages, both.url, tmp_path, **settings) as service:
        with opened(browser, service.url) as page:
            page.evaluate("localStorage.setItem('research-plan-seconds', '0')")  # for Start
            page.locator("#research-switch").click()
            type_and_send(page, QUESTION)
            said = "Up to 3 searches (6 Brave queries), about 0.030 $ at most"
            expect(page.locator(".plan-card")).to_contain_text(said)
            assert page.log.errors == []


def test_the_pages_figures_price_the_two_queries(browser, chat, llm, brave):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "rust ownership"})]),
        Reply(text="Ownership."),
    )
    with opened(browser, chat.url) as page:
        type_and_send(page, "What is ownership in Rust?")
        wait_turn_end(page)
        stats = page.locator(".answer-stats").last
        expect(stats).to_contain_text("1 search, about 0.010 $")
        stored_before_queries_were_said(chat)
        page.reload()
        expect(stats).to_contain_text("1 search, about 0.005 $")  # such a search: one query
        assert page.log.errors == []


def stored_before_queries_were_said(chat: ChatService) -> None:
    """The service's answers as an older service stored them: search steps without
    `queries`."""
    with closing(sqlite3.connect(chat.settings.data_dir / "chat.db")) as database, database:
        for rowid, details in database.execute(
            "SELECT rowid, details FROM messages WHERE role = 'assistant'"
        ).fetchall():
            kept = json.loads(details)
            for step in kept.get("activity", []):
                step.pop("queries", None)
            database.execute(
                "UPDATE messages SET details = ? WHERE rowid = ?", (json.dumps(kept), rowid)
            )


def test_a_persons_share_counts_both_queries_of_a_search(request, llm, both, brave, tmp_path):
    """Household mode (a proxy names Alice): a share of 3 queries a day holds one search of
    two; the next would need two more, so it is refused and nothing reaches Brave."""
    env = chat_env(
        llm,
        tmp_path,
        SEARCH_RATE="1",
        SEARCH_USER_DAILY_LIMIT="3",
        AUTH_USER_HEADER="Remote-User",
        TRUSTED_PROXIES="127.0.0.1",
    )
    alice = {"Remote-User": "alice"}
    with service_for(request, env, both.url) as home:
        lab = "/api/lab/search"
        first = home.http.get(lab, params={"q": "rust ownership"}, headers=alice, timeout=60)
        assert first.status_code == 200, first.text
        again = home.http.get(lab, params={"q": "rust lifetimes"}, headers=alice, timeout=60)
        assert (again.status_code, again.json()["detail"]) == (
            429,
            "your share of today's searches is used up (2 of 3; this search needs 2)",
        )
        assert len(brave.requests) == 2
        share = home.http.get("/api/search-share", headers=alice).json()
        assert (share["today"], share["daily"]) == (2, 3)
