"""The Brave plan seen everywhere and each engine's failure named: a real SearXNG with our
engine on the fake Brave API (sending the real X-RateLimit-* shapes on every answer), the
chat service on loopback, and a loopback site that blocks a key-free engine with a CAPTCHA."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from app import config
from app.search.client import Searxng
from app.search.embedded import EmbeddedSearxng, write_settings
from app.search.plan import PlanReader
from tests.browser import opened
from tests.chat_client import new_conversation, send
from tests.conftest import (
    API_KEY,
    SERVER_LOCALE,
    ChatService,
    chat_env,
    on_socket,
    run_cli,
    run_main,
    searxng_env,
)
from tests.fakes.blocked_site import BlockedSite
from tests.fakes.llm_server import Reply, ToolCall

MONTH_END = re.compile(r"monthly quota is used up until (\d{4}-\d{2}-\d{2})")


def checks(chat: ChatService) -> dict[str, dict]:
    answer = chat.http.get("/api/status", params={"quick": "1"}, timeout=30)
    answer.raise_for_status()
    return {check["id"]: check for check in answer.json()["checks"]}


def lab_search(chat: ChatService, q: str) -> httpx.Response:
    return chat.http.get("/api/lab/search", params={"q": q}, timeout=30)


@pytest.fixture
def plan_service(request, llm, fresh_searxng, tmp_path, database_url) -> Iterator:
    """service() on a SearXNG of its own, reading the plan file that SearXNG writes; its
    count of searches on each backend."""
    llm.clear()
    started: list[ChatService] = []

    def start(**env: str) -> ChatService:
        env.setdefault("SEARCH_PLAN_FILE", str(fresh_searxng.plan_file))
        env.setdefault("DATABASE_URL", database_url)
        env = chat_env(llm, tmp_path, **env)
        running = ChatService(env, fresh_searxng.url, socket=on_socket(request)).start()
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


def test_the_quota_shows_after_one_search_and_after_a_restart(plan_service, brave):
    chat = plan_service()
    before = checks(chat)["brave_plan"]
    assert before["state"] == "ok"
    assert "not known yet" in before["detail"] and "sent 0 today, 0 this month" in before["detail"]
    assert chat.http.get("/healthz").json()["search_plan"]["rate_per_second"] == 1.0

    brave.spend(1_000)  # spent elsewhere this month: Brave's count, not ours
    assert lab_search(chat, "rust ownership").status_code == 200
    shown = checks(chat)["brave_plan"]
    assert "1 query a second" in shown["detail"]
    assert "13,999 of 15,000 queries left this month" in shown["detail"]
    assert "sent 1 today, 1 this month" in shown["detail"]
    health = chat.http.get("/healthz").json()["search_plan"]
    assert health["plan"]["monthly_remaining"] == 13_999
    assert (health["queries_today"], health["queries_this_month"]) == (1, 1)

    chat.stop()
    again = plan_service()  # the same DATA_DIR and plan file
    assert checks(again)["brave_plan"]["detail"] == shown["detail"]


def test_the_queries_sent_are_shown_with_what_they_cost(plan_service, brave, llm, tmp_path):
    chat = plan_service()  # the Search plan's price: 5 $ per 1,000
    assert lab_search(chat, "rust ownership").status_code == 200
    assert lab_search(chat, "python asyncio").status_code == 200
    assert (
        "sent 2 today, 2 this month (about 0.010 $ today, 0.010 $ this month)"
        in (checks(chat)["brave_plan"]["detail"])
    )
    chat.stop()
    run = run_main(  # doctor reads the same count
        "doctor",
        searxng_url="http://127.0.0.1:9",
        DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=chat.settings.database_url or "",
        LLM_BASE_URL=llm.api_base,
        DEFAULT_MODEL="fake-model",
        BRAVE_PRICE_PER_1000="9",
    )
    assert "sent 2 today, 2 this month (about 0.018 $ today, 0.018 $ this month)" in run.stdout
    free = run_main("doctor", searxng_url="http://127.0.0.1:9", BRAVE_PRICE_PER_1000="0")
    assert "this month" in free.stdout and " $" not in free.stdout


def test_below_a_tenth_left_the_plan_warns(plan_service, brave):
    chat = plan_service()
    brave.spend(14_000)
    assert lab_search(chat, "rust ownership").status_code == 200
    shown = checks(chat)["brave_plan"]
    assert shown["state"] == "warning" and "999 of 15,000" in shown["detail"]
    assert "below 10% left" in shown["detail"] and shown["fix"]


def test_a_used_up_month_is_named_in_the_turn_and_on_the_status_panel(plan_service, brave, llm):
    chat = plan_service()
    brave.monthly_quota = 10
    brave.spend(10)  # the next query is one too many: 429 QUOTA_LIMITED
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "rust ownership"})]),
        Reply(text="I could not search."),
    )
    events = send(chat, new_conversation(chat), "What is ownership in Rust?")
    search = next(e for e in events if e["type"] == "search")
    until = MONTH_END.search(search["error"])
    assert until, search
    # The last day of this month (UTC), as Brave's reset header says.
    assert until[1][:7] == time.strftime("%Y-%m", time.gmtime())
    told = [m["content"] for m in llm.requests[1].body["messages"] if m.get("role") == "tool"]
    assert MONTH_END.search(told[-1])  # the model reads what happened, not "no results"

    panel = checks(chat)
    assert panel["brave_plan"]["state"] == "warning"
    assert f"used up until {until[1]}" in panel["brave_plan"]["detail"]
    suspended = panel[f"suspended_{config.ENGINE_NAME}"]
    assert MONTH_END.search(suspended["detail"]) and suspended["state"] == "warning"


def test_a_used_up_month_is_named_by_doctor(fresh_searxng, brave, llm, tmp_path):
    brave.monthly_quota = 10
    brave.spend(10)
    run = run_main(
        "doctor",
        searxng_url=fresh_searxng.url,
        SEARCH_PLAN_FILE=str(fresh_searxng.plan_file),
        DATA_DIR=str(tmp_path / "data"),
        LLM_BASE_URL=llm.api_base,
        DEFAULT_MODEL="fake-model",
        BRAVE_API_KEY=API_KEY,
    )
    assert run.returncode == 1  # the Brave key's check failed
    assert MONTH_END.search(run.stdout), run.stdout
    assert "api-dashboard.search.brave.com" in run.stdout  # the fix


def test_a_per_second_429_suspends_the_engine_about_a_second(fresh_searxng, brave):
    async def scenario() -> float:
        plan = PlanReader(fresh_searxng.plan_file)
        async with Searxng(fresh_searxng.url, plan=plan) as client:
            brave.fail_next(429, "RATE_LIMITED")
            refused = await client.search("rust", engines=config.ENGINE_NAME)
            assert "per-second rate limit" in (refused.unavailable or ""), refused
            refused_at = time.monotonic()
            while time.monotonic() - refused_at < 30:
                answered = await client.search("rust", engines=config.ENGINE_NAME)
                if answered.results:
                    return time.monotonic() - refused_at
                await asyncio.sleep(0.2)
        raise AssertionError("the engine stayed suspended")

    # Brave's reset says 1 s; SearXNG's default for a 429 would be an hour.
    assert asyncio.run(scenario()) < 5


@pytest.fixture
def blocked_searxng(brave, tmp_path) -> Iterator[EmbeddedSearxng]:
    """A SearXNG with our engine and a key-free engine whose site blocks it (CAPTCHA)."""
    with BlockedSite() as site:
        env = searxng_env(brave)
        rendered = tmp_path / "rendered"
        write_settings(rendered, SERVER_LOCALE, brave_api_key=API_KEY, allow_http_engine=True)
        settings = yaml.safe_load((rendered / "settings.yml").read_text())
        settings["use_default_settings"]["engines"]["keep_only"].append("keyfree")
        settings["engines"].append(
            {
                "name": "keyfree",
                "engine": "json_engine",
                "shortcut": "kf",
                "search_url": f"{site.url}/search?q={{query}}",
                "results_query": "results",
                "url_query": "url",
                "title_query": "title",
                "content_query": "content",
                "categories": ["general"],
                "enable_http": True,
                "disabled": False,
            }
        )
        (rendered / "settings.yml").write_text(yaml.safe_dump(settings))
        with EmbeddedSearxng(SERVER_LOCALE, environ=env, rendered=rendered) as instance:
            instance.site = site  # type: ignore[attr-defined]
            yield instance


def test_a_blocked_key_free_engine_is_named_on_the_status_panel(
    blocked_searxng, brave, llm, tmp_path
):
    env = chat_env(llm, tmp_path, SEARCH_PLAN_FILE=str(blocked_searxng.plan_file))
    chat = ChatService(env, blocked_searxng.url).start()
    try:
        assert lab_search(chat, "rust").status_code == 200  # Brave answered; keyfree did not
        assert blocked_searxng.site.requests  # type: ignore[attr-defined]
        panel = checks(chat)
        check = panel["suspended_keyfree"]
        assert check["state"] == "warning" and check["part"] == "engine"
        assert "keyfree blocked this address (CAPTCHA)" in check["detail"]
        # SearXNG suspends for a Cloudflare CAPTCHA for 15 days: the end is named.
        assert re.search(r"suspended until \d{4}-\d{2}-\d{2}", check["detail"]), check
        assert "BRAVE_API_KEY" in check["fix"] or "resumes" in check["fix"]
        health = chat.http.get("/healthz").json()["search_plan"]
        assert [s["engine"] for s in health["suspended"]] == ["keyfree"]
    finally:
        chat.stop()


def test_only_blocked_engines_give_a_named_failure_not_an_empty_list(blocked_searxng, brave):
    async def scenario() -> str | None:
        async with Searxng(blocked_searxng.url) as client:
            response = await client.search("rust", engines="keyfree")
            return response.unavailable

    named = asyncio.run(scenario())
    assert named and "keyfree blocked this address (CAPTCHA)" in named


def test_searches_are_counted_where_the_client_calls_searxng(fresh_searxng, brave, tmp_path):
    counted: list[int] = []

    async def count() -> None:
        counted.append(1)

    async def scenario() -> None:
        async with Searxng(fresh_searxng.url, count=count) as client:
            await client.search("rust")
            await client.search("rust", engines=config.ENGINE_NAME)

    asyncio.run(scenario())
    assert len(counted) == 2
    assert Path(fresh_searxng.plan_file).exists()


def test_a_used_up_month_is_named_in_the_pages_trail_and_status_panel(
    browser, plan_service, brave, llm
):
    from playwright.sync_api import expect

    chat = plan_service()
    brave.monthly_quota = 10
    brave.spend(10)
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "rust ownership"})]),
        Reply(text="I could not search."),
    )
    with opened(browser, chat.url) as page:
        page.fill("#composer-input", "What is ownership in Rust?")
        page.keyboard.press("Enter")
        expect(page.locator("body")).to_have_attribute("data-turns-ended", "1", timeout=30_000)
        trail = page.locator(".trail").last
        trail.locator("summary").click()
        expect(trail.locator(".timeline")).to_contain_text(MONTH_END)
        page.locator("#open-status").click()
        expect(page.locator(".status-panel")).to_contain_text(MONTH_END)
        expect(page.locator(".status-panel")).to_contain_text("Brave plan")


def test_a_commands_searches_count_with_the_services(
    plan_service, fresh_searxng, brave, tmp_path, database_url
):
    chat = plan_service()
    run = run_cli(
        "search",
        "rust",
        searxng_url=fresh_searxng.url,
        DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=database_url,
        SEARCH_PLAN_FILE=str(fresh_searxng.plan_file),
    )
    assert run.returncode == 0, run.stderr
    assert "sent 1 today, 1 this month" in checks(chat)["brave_plan"]["detail"]


def test_doctor_names_a_blocked_key_free_engine_and_until_when(blocked_searxng, llm, tmp_path):
    run = run_main(
        "doctor",
        searxng_url=blocked_searxng.url,
        SEARCH_PLAN_FILE=str(blocked_searxng.plan_file),
        DATA_DIR=str(tmp_path / "data"),
        LLM_BASE_URL=llm.api_base,
        DEFAULT_MODEL="fake-model",
        BRAVE_API_KEY=API_KEY,
    )
    line = next((x for x in run.stdout.splitlines() if "engine keyfree" in x), "")
    assert line.startswith("warn"), run.stdout
    assert re.search(r"keyfree blocked this address \(CAPTCHA\); suspended until \d{4}-", line)


def test_the_lab_and_status_panel_put_a_price_on_the_queries(plan_service, brave):
    chat = plan_service()  # the Search plan's price: 5 $ per 1,000
    brave.spend(1_000)
    assert lab_search(chat, "rust ownership").json()["cost"] == 0.005
    assert lab_search(chat, "rust ownership").json()["cost"] == 0.0  # the cache answered
    detail = checks(chat)["brave_plan"]["detail"]
    assert "13,999 of 15,000 queries left this month" in detail
    assert "queries left are worth about 69.995 $ of 75.000 $" in detail
    chat.stop()
    free = plan_service(BRAVE_PRICE_PER_1000="0")  # an old free plan: no money anywhere
    assert lab_search(free, "python asyncio").json()["cost"] is None
    detail = checks(free)["brave_plan"]["detail"]
    assert "13,998 of 15,000 queries left this month" in detail and "$" not in detail


def test_an_answers_figures_and_the_labs_say_what_its_searches_cost(
    browser, plan_service, brave, llm
):
    from playwright.sync_api import expect

    from tests.page_actions import send, wait_turn_end

    chat = plan_service(BRAVE_PRICE_PER_1000="6")
    search = Reply(tool_calls=[ToolCall("web_search", {"query": "rust ownership"})])
    other = Reply(tool_calls=[ToolCall("web_search", {"query": "rust borrowing"})])
    llm.script(search, other, Reply(text="Ownership."), search, Reply(text="Again."))
    with opened(browser, chat.url) as page:
        send(page, "What is ownership in Rust?")
        wait_turn_end(page)
        stats = page.locator(".answer-stats")
        expect(stats.last).to_contain_text("2 searches, about 0.012 $")
        send(page, "And once more?")  # the same search: the cache answers, nothing is spent
        wait_turn_end(page)
        expect(stats.last).to_contain_text("1 search")
        expect(stats.last).not_to_contain_text("$")
        page.goto(f"{chat.url}/#/lab")
        summary = page.locator(".lab-results .lab-summary")
        for query, said in (("rust ownership", "no Brave query spent"), ("tatra", "about 0.006 $")):
            page.fill("#lab-query", query)
            page.click(".lab-actions button[type=submit]")
            expect(summary).to_contain_text(said)
        assert page.log.errors == []
    chat.stop()
    free = plan_service(BRAVE_PRICE_PER_1000="0")  # an old free plan: no money anywhere
    traits = Reply(tool_calls=[ToolCall("web_search", {"query": "rust traits"})])
    llm.script(traits, Reply(text="Traits."))
    with opened(browser, free.url) as page:
        send(page, "What are traits?")
        wait_turn_end(page)
        shown = page.locator(".answer-stats")
        expect(shown).to_contain_text("1 search")
        expect(shown).not_to_contain_text("$")
