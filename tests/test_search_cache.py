"""Searches paced to the plan and served from the cache (issue 25, items 2 and 3): through
the real SearXNG with our engine, on the fake Brave API, which records when each query
arrived; the turns, the lab and Settings through the real service."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.search.client import SearchResponse, Searxng
from app.search.governor import Governor
from app.search.plan import PlanReader
from app.search.searcher import RETRY_SECONDS, RateLimited, Searcher
from app.search.shares import ShareUsedUp
from app.store.storage import Storage
from tests.chat_client import get_conversation, new_conversation, send, stream
from tests.conftest import ChatService, chat_env
from tests.fakes.brave_api import SEARCH_PATH, FakeBrave
from tests.fakes.llm_server import Reply, ToolCall


def queries(brave: FakeBrave) -> list[Any]:
    """The queries Brave was asked (each one spent from the plan)."""
    return [r for r in brave.requests if r.path == SEARCH_PATH]


@pytest.fixture
def storage(tmp_path: Path, database_url: str) -> Iterator[Storage]:
    """The cache's rows, on each backend."""
    kept = Storage(tmp_path, database_url=database_url)
    kept.open()
    yield kept
    kept.close()


def searching(url: str, *searches: tuple[str, dict[str, Any]], **kwargs: Any) -> list[Any]:
    """Run the searches one after the other through one Searcher; each response, or the
    error it raised."""

    async def scenario() -> list[Any]:
        async with Searcher(Searxng(url), **kwargs) as searcher:
            outcomes: list[Any] = []
            for query, options in searches:
                try:
                    outcomes.append(await searcher.search(query, **options))
                except RateLimited as exc:
                    outcomes.append(exc)
            return outcomes

    return asyncio.run(scenario())


def fast(**kwargs: Any) -> dict[str, Any]:
    """A plan of 50 searches a second: the tests of the cache need not wait."""
    return {"governor": Governor(lambda: 50.0), **kwargs}


# -- the governor ------------------------------------------------------------------------------


def test_concurrent_searches_reach_brave_at_most_one_a_second(searxng, brave):
    async def scenario() -> list[SearchResponse]:
        async with Searcher(Searxng(searxng.url), Governor(lambda: 1.0)) as searcher:
            return list(
                await asyncio.gather(
                    *(searcher.search(f"pacing {n}", locale="pl-PL") for n in range(4))
                )
            )

    responses = asyncio.run(scenario())
    assert all(r.results for r in responses)
    arrived = sorted(r.at for r in queries(brave))
    assert len(arrived) == 4
    gaps = [later - earlier for earlier, later in zip(arrived, arrived[1:], strict=False)]
    assert min(gaps) >= 1.0, gaps
    # Each queued behind the ones before: the last waited three of the plan's seconds.
    assert max(r.waited for r in responses) >= 3.0
    assert min(r.waited for r in responses) < 0.5


def test_a_search_stopped_while_queued_leaves_no_wait_behind():
    # What the trail says a search will wait counts the searches ahead; one stopped while
    # it queued is no longer ahead of anybody.
    async def scenario() -> tuple[float, float]:
        governor = Governor(lambda: 0.5)

        async def search() -> None:
            async with governor.slot():
                pass

        async with governor.slot():
            queued = asyncio.ensure_future(search())
            await asyncio.sleep(0.01)
            ahead = governor.expected_wait()  # the one searching, and the one queued
            queued.cancel()
            await asyncio.gather(queued, return_exceptions=True)
        return ahead, governor.expected_wait()

    ahead, after = asyncio.run(scenario())
    assert ahead == pytest.approx(4.0, abs=0.1)
    assert after == pytest.approx(2.0, abs=0.1)  # the plan's pause after the last search


def test_a_search_refused_for_a_persons_share_leaves_no_pause_behind():
    # Nothing reached Brave, so the next search (another person's) need not wait for it.
    async def scenario() -> float:
        governor = Governor(lambda: 0.5)
        with pytest.raises(ShareUsedUp):
            async with governor.slot():
                raise ShareUsedUp(1, "your share of today's searches is used up (1 of 1)")
        return governor.expected_wait()

    assert asyncio.run(scenario()) == 0.0


def test_a_rate_limited_search_is_retried_once_after_the_reset(fresh_searxng, brave):
    brave.fail_next(429, "RATE_LIMITED")
    (response,) = searching(fresh_searxng.url, ("retried", {}), **fast())
    assert response.results and response.engine_errors == []
    assert len(queries(brave)) == 2
    assert response.waited >= 3.0  # the retry's delay is part of the wait the trail shows


def test_the_retry_waits_for_the_reset_brave_gave(fresh_searxng, brave):
    # The engine records the 429's X-RateLimit-Reset (1 s for the per-second window) in
    # the plan file; the retry waits that and a margin, not the fixed fallback.
    brave.fail_next(429, "RATE_LIMITED")
    plan = PlanReader(fresh_searxng.plan_file)
    (response,) = searching(
        fresh_searxng.url, ("reset", {}), retry_seconds=plan.retry_seconds, **fast()
    )
    assert response.results and len(queries(brave)) == 2
    first, second = (r.at for r in queries(brave))
    assert second - first >= 1.0  # not before Brave's window reset
    assert 1.0 <= response.waited < RETRY_SECONDS  # the reset and the margin, not 3 s


def test_a_429_whose_window_resets_far_off_is_told_not_waited_for(fresh_searxng, brave, tmp_path):
    brave.fail_next(429, "RATE_LIMITED")
    far = tmp_path / "brave-plan.json"  # a plan whose 429 resets in a minute
    now = time.time()
    far.write_text(
        json.dumps(
            {
                "limit": [1, 0],
                "remaining": [0, 0],
                "reset": [60, 0],
                "read_at": now,
                "limited": "RATE_LIMITED",
                "limited_until": now + 60,
            }
        )
    )
    (refused,) = searching(
        fresh_searxng.url, ("far", {}), retry_seconds=PlanReader(far).retry_seconds, **fast()
    )
    assert isinstance(refused, RateLimited) and "RATE_LIMITED" in str(refused)
    assert len(queries(brave)) == 1  # no retry: a minute is no short wait


def test_a_search_refused_twice_for_the_rate_is_a_named_failure(fresh_searxng, brave):
    brave.fail_next(429, "RATE_LIMITED", times=2)
    (refused,) = searching(fresh_searxng.url, ("refused", {}), **fast())
    assert isinstance(refused, RateLimited)
    assert "rate was exceeded, and again when retried" in str(refused)
    assert "RATE_LIMITED" in str(refused)


def test_the_monthly_quota_used_up_is_not_retried(fresh_searxng, brave):
    brave.fail_next(429, "QUOTA_LIMITED")
    (refused,) = searching(fresh_searxng.url, ("quota", {}), **fast())
    assert isinstance(refused, RateLimited)
    assert "monthly quota is used up" in str(refused)
    assert len(queries(brave)) == 1


# -- the cache ---------------------------------------------------------------------------------


def test_the_same_search_is_served_from_the_cache(searxng, brave, storage):
    first, again, spaced, fresh = searching(
        searxng.url,
        ("Rust async", {"locale": "pl-PL"}),
        ("  rust   ASYNC ", {"locale": "pl-PL"}),  # the same words, spelled otherwise
        ("rust async", {"locale": "pl-PL", "page": 2}),  # another page: another search
        ("rust async", {"locale": "pl-PL", "fresh": True}),
        **fast(cache=storage, ttl=3600),
    )
    assert first.cached_age is None
    assert again.cached_age is not None and 0 <= again.cached_age < 60
    assert again.results == first.results
    assert spaced.cached_age is None and fresh.cached_age is None
    assert len(queries(brave)) == 3


def test_the_same_search_asked_at_once_is_asked_of_brave_once(searxng, brave, storage):
    async def scenario() -> list[SearchResponse]:
        async with Searcher(Searxng(searxng.url), cache=storage, ttl=3600) as searcher:
            return list(
                await asyncio.gather(
                    *(searcher.search("at once", locale="pl-PL") for _ in range(3)),
                    searcher.search("at once", locale="pl-PL", fresh=True),
                )
            )

    *same, fresh = asyncio.run(scenario())
    assert same[0].results and all(r.results == same[0].results for r in same)
    assert fresh.results
    assert len(queries(brave)) == 2  # the three as one, and the fresh one


def test_a_search_with_a_failed_engine_or_no_results_is_never_cached(
    fresh_searxng, brave, tmp_path, database_url
):
    brave.fail_next(500, "INTERNAL_ERROR")
    brave.no_hits_queries.add("nothing at all")
    kept = Storage(tmp_path, database_url=database_url)
    kept.open()
    try:
        failed, retried, empty, empty_again = searching(
            fresh_searxng.url,
            ("broken engine", {}),
            ("broken engine", {}),
            ("nothing at all", {}),
            ("nothing at all", {}),
            **fast(cache=kept, ttl=3600),
        )
    finally:
        kept.close()
        brave.no_hits_queries.clear()
    assert failed.engine_errors and not failed.results
    assert retried.results and retried.cached_age is None
    assert not empty.results and empty_again.cached_age is None
    assert len(queries(brave)) == 4


def test_the_least_recently_used_search_leaves_a_full_cache(searxng, brave, storage):
    outcomes = searching(
        searxng.url,
        ("lru a", {}),
        ("lru b", {}),
        ("lru a", {}),  # from the cache, and now more recently used than b
        ("lru c", {}),  # a third one: b goes
        ("lru a", {}),
        ("lru b", {}),
        **fast(cache=storage, ttl=3600, entries=2),
    )
    cached = [o.cached_age is not None for o in outcomes]
    assert cached == [False, False, True, False, True, False]
    assert [r.params["q"] for r in queries(brave)] == ["lru a", "lru b", "lru c", "lru b"]


def test_an_expired_search_is_asked_again(searxng, brave, storage):
    (kept,) = searching(searxng.url, ("expiring", {}), **fast(cache=storage, ttl=3600))
    (young,) = searching(searxng.url, ("expiring", {}), **fast(cache=storage, ttl=3600))
    (expired,) = searching(searxng.url, ("expiring", {}), **fast(cache=storage, ttl=1e-6))
    assert young.cached_age is not None and expired.cached_age is None
    assert len(queries(brave)) == 2


def test_every_replica_of_one_database_shares_the_cache_and_the_count(
    searxng, brave, storage, tmp_path, database_url
):
    """Another process on DATA_DIR, or another machine on the same PostgreSQL."""
    other = Storage(tmp_path / "elsewhere" if database_url else tmp_path, database_url=database_url)
    try:
        (first,) = searching(searxng.url, ("shared search", {}), **fast(cache=storage, ttl=3600))
        (again,) = searching(searxng.url, ("shared search", {}), **fast(cache=other, ttl=3600))

        async def count() -> tuple[int, int]:
            await storage.count_search()
            await other.count_search()
            return (await storage.searches_spent()).today, (await other.searches_spent()).today

        assert asyncio.run(count()) == (2, 2)
    finally:
        other.close()
    assert first.cached_age is None and again.cached_age is not None
    assert len(queries(brave)) == 1


# -- through the service -----------------------------------------------------------------------


def search_turn(llm, query: str, answer: str) -> None:
    llm.script(Reply(tool_calls=[ToolCall("web_search", {"query": query})]), Reply(text=answer))


def search_steps(chat, conversation_id: str) -> list[dict[str, Any]]:
    messages = get_conversation(chat, conversation_id)["messages"]
    return [step for step in messages[-1]["activity"] if step["type"] == "search"]


def test_a_regenerate_spends_no_query_and_its_trail_says_from_cache(chat, llm, brave):
    search_turn(llm, "longest river", "The Nile [1].")
    conversation_id = new_conversation(chat)
    send(chat, conversation_id, "Which is the longest river?")
    (first,) = search_steps(chat, conversation_id)
    assert "cached_age" not in first
    search_turn(llm, "longest river", "The Nile, still [1].")
    events = stream(chat, f"/api/conversations/{conversation_id}/regenerate", {})
    assert events[-1]["type"] == "done"
    (again,) = search_steps(chat, conversation_id)
    assert again["cached_age"] >= 0
    assert again["results"] == first["results"]
    assert len(queries(brave)) == 1
    # Another conversation asking the same spends none either.
    search_turn(llm, "Longest  river", "The Nile.")
    send(chat, new_conversation(chat), "And the longest river?")
    assert len(queries(brave)) == 1


def test_with_a_ttl_of_0_every_search_asks_brave(llm, pages, searxng, brave, tmp_path):
    env = chat_env(llm, tmp_path, pages, SEARCH_CACHE_TTL="0")
    service = ChatService(env, searxng.url, socket=False).start()
    try:
        for _ in range(2):
            search_turn(llm, "no cache here", "Answered.")
            send(service, new_conversation(service), "Search, please.")
        lab = service.http.get("/api/lab/search", params={"q": "no cache here"})
        assert lab.status_code == 200 and lab.json()["cached_age"] is None
    finally:
        service.stop()
    assert len(queries(brave)) == 3


def lab_search(chat, **params: str) -> dict[str, Any]:
    response = chat.http.get("/api/lab/search", params=params, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_labs_fresh_switch_asks_brave_again(chat, brave):
    first = lab_search(chat, q="lab cache", locale="pl-PL")
    cached = lab_search(chat, q="lab cache", locale="pl-PL")
    assert first["cached_age"] is None and cached["cached_age"] is not None
    assert len(queries(brave)) == 1
    fresh = lab_search(chat, q="lab cache", locale="pl-PL", fresh="true")
    assert fresh["cached_age"] is None
    assert len(queries(brave)) == 2


def test_settings_empties_the_search_cache(chat, brave):
    lab_search(chat, q="to be forgotten")
    assert lab_search(chat, q="to be forgotten")["cached_age"] is not None
    emptied = chat.http.delete("/api/search-cache")
    assert emptied.status_code == 200 and emptied.json() == {"emptied": 1}
    assert lab_search(chat, q="to be forgotten")["cached_age"] is None
    assert len(queries(brave)) == 2


# -- on the page -------------------------------------------------------------------------------


def test_the_page_says_from_cache_and_settings_empties_it(page, llm, brave):
    from playwright.sync_api import expect

    from tests.page_actions import send as type_question
    from tests.page_actions import turns_ended, wait_turn_end

    search_turn(llm, "pierogi czas gotowania", "Four minutes [1].")
    type_question(page, "Jak długo gotować pierogi?")
    wait_turn_end(page)
    search_turn(llm, "pierogi czas gotowania", "Four minutes, still [1].")
    page.ended_before = turns_ended(page)
    page.get_by_role("button", name="Regenerate").click()
    wait_turn_end(page)
    trail = page.locator(".trail").last
    trail.locator("summary").click()
    expect(trail.locator(".timeline")).to_contain_text(re.compile(r"from cache, \d+ s old"))
    assert len(queries(brave)) == 1

    page.locator("#open-settings").click()
    page.locator("#empty-search-cache").click()
    expect(page.locator("#settings-dialog")).to_contain_text("Emptied: 1 search removed.")
    assert page.log.errors == []


def test_two_conversations_searching_at_once_queue_and_the_trail_says_so(chat, llm, brave):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "queued one"})]),
        Reply(tool_calls=[ToolCall("web_search", {"query": "queued two"})]),
        Reply(text="One."),
        Reply(text="Two."),
    )
    ids = [new_conversation(chat), new_conversation(chat)]
    threads = [
        threading.Thread(target=send, args=(chat, conversation_id, "Search, please."))
        for conversation_id in ids
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    steps = [step for conversation_id in ids for step in search_steps(chat, conversation_id)]
    assert len(steps) == 2 and not any("error" in step for step in steps)
    assert max(step.get("waited", 0) for step in steps) >= 0.9  # the plan's second, in the trail
    first, second = sorted(r.at for r in queries(brave))
    assert second - first >= 1.0


def test_a_search_waiting_for_the_rate_is_told_while_it_waits(llm, pages, searxng, brave, tmp_path):
    # One answer with two searches at one search every two seconds: the second waits.
    llm.script(
        Reply(
            tool_calls=[
                ToolCall("web_search", {"query": "first of two"}),
                ToolCall("web_search", {"query": "second of two"}),
            ]
        ),
        Reply(text="Both [1]."),
    )
    env = chat_env(llm, tmp_path, pages, SEARCH_RATE="0.5", SEARCH_CACHE_TTL="0")
    service = ChatService(env, searxng.url).start()
    try:
        conversation_id = new_conversation(service)
        events = send(service, conversation_id, "Search twice, please.")
        activity = get_conversation(service, conversation_id)["messages"][-1]["activity"]
    finally:
        service.stop()
    told = [(e["type"], e.get("query")) for e in events if e["type"].startswith("search")]
    assert told == [
        ("search", "first of two"),
        ("search_wait", "second of two"),  # before its search has ended
        ("search", "second of two"),
    ]
    (waiting,) = [e for e in events if e["type"] == "search_wait"]
    assert 1.5 <= waiting["seconds"] <= 2.0  # the plan's two seconds, said up front
    assert [step["type"] for step in activity] == ["search", "search"]  # not kept
    assert activity[1]["waited"] >= 1.5


def test_the_page_says_a_search_is_waiting_then_that_it_waited(page, llm, brave):
    from playwright.sync_api import expect

    from tests.page_actions import send as type_question
    from tests.page_actions import wait_turn_end

    llm.script(
        Reply(
            tool_calls=[
                ToolCall("web_search", {"query": "page first"}),
                ToolCall("web_search", {"query": "page second"}),
            ]
        ),
        Reply(text="Both [1]."),
    )
    type_question(page, "Search twice, please.")
    timeline = page.locator(".trail").last.locator(".timeline")
    expect(timeline).to_contain_text(
        re.compile(r"Searching “page second” · waiting \d\.\d s for the search plan's rate")
    )
    wait_turn_end(page)
    expect(timeline).to_contain_text(re.compile(r"waited \d\.\d s for the search plan's rate"))
    expect(timeline).not_to_contain_text("waiting")
    assert page.log.errors == []
