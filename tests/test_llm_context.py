"""Brave's LLM Context as a second source: our bravellm engine in a real SearXNG against the
fake Brave API (what reaches Brave, what comes back, Brave's errors), and what the chat
service and the research mode make of a result whose page Brave has already read."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from playwright.sync_api import expect

from app.chat.fitting import CUT_MARKER
from app.search.client import Searxng
from app.search.embedded import EmbeddedSearxng
from tests.browser import opened
from tests.chat_client import done, get_conversation, new_conversation, send
from tests.conftest import API_KEY, chat_env, run_main, searxng_env, service_for
from tests.fakes.brave_api import CONTEXT_PATH, CorpusPage
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall
from tests.page_actions import send as type_and_send
from tests.page_actions import wait_turn_end
from tests.research_model import ARTICLE_QUOTE, QUESTION, scripted_on
from tests.searxng_defaults import searching_with

ENGINE = "bravellm"


def search(searxng: EmbeddedSearxng, **params: str) -> dict:
    params = {"format": "json", "engines": ENGINE, **params}
    response = httpx.get(f"{searxng.url}/search", params=params, timeout=30)
    response.raise_for_status()
    return response.json()


def context_requests(brave) -> list:
    return [r for r in brave.requests if r.path == CONTEXT_PATH]


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("pl-PL", {"country": "PL", "search_lang": "pl"}),
        ("pl", {"search_lang": "pl"}),
        ("fr-FR", {"country": "FR", "search_lang": "fr"}),
        ("all", {}),
    ],
)
def test_the_locale_reaches_brave_llm_context(searxng, brave, locale, expected):
    search(searxng, q=f"kubernetes {locale}", language=locale)
    params = context_requests(brave)[-1].params
    assert {k: params[k] for k in ("country", "search_lang") if k in params} == expected
    assert "ui_lang" not in params  # no parameter of this endpoint


def test_the_server_default_locale_applies_when_the_client_sends_none(searxng, brave):
    search(searxng, q="python asyncio")
    params = context_requests(brave)[-1].params
    assert (params["country"], params["search_lang"]) == ("PL", "pl")


def test_the_request_carries_brave_documented_caps(searxng, brave):
    search(searxng, q="docker volumes", time_range="week")
    request = context_requests(brave)[-1]
    assert request.params["maximum_number_of_tokens"] == "8192"
    assert request.params["maximum_number_of_tokens_per_url"] == "4096"
    assert 1 <= int(request.params["maximum_number_of_urls"]) <= 50
    assert request.params["context_threshold_mode"] == "balanced"
    assert request.params["freshness"] == "pw"
    assert request.headers["x-subscription-token"] == API_KEY


def test_each_result_is_a_page_with_its_date_and_passages(searxng, brave):
    brave.corpus = (
        CorpusPage(
            "https://docs.example/volumes",
            "Docker volumes",
            "Named volumes keep data when a container is removed. Bind mounts map a host "
            "folder. Volumes are managed by Docker itself.",
            day="2026-03-02",
        ),
    )
    [result] = search(searxng, q="docker volumes", language="en")["results"]
    assert result["url"] == "https://docs.example/volumes"
    assert result["engine"] == ENGINE
    assert result["content"].startswith("2026-03-02 — ")
    assert "Named volumes keep data when a container is removed." in result["content"]
    assert " ¶ " in result["content"]  # the passages, one after another


def test_the_token_caps_are_settings(brave):
    env = {**searxng_env(brave), "BRAVE_CONTEXT_TOKENS": "2048"}
    env["BRAVE_CONTEXT_TOKENS_PER_URL"] = "99999"  # beyond Brave's 8,192: held to it
    with EmbeddedSearxng("all", environ=env) as own:
        search(own, q="rust")
    params = context_requests(brave)[-1].params
    assert params["maximum_number_of_tokens"] == "2048"
    assert params["maximum_number_of_tokens_per_url"] == "8192"


def test_a_bad_key_reaches_the_cli_with_brave_code_and_detail(fresh_searxng, brave):
    brave.fail_next(422, "SUBSCRIPTION_TOKEN_INVALID")
    run = run_main("search", "rust", "--engines", ENGINE, searxng_url=fresh_searxng.url)
    assert run.returncode != 0
    assert "SUBSCRIPTION_TOKEN_INVALID" in run.stderr
    assert "Brave API 422" in run.stderr


def test_a_rate_limit_is_named_and_suspends_only_as_long_as_brave_says(fresh_searxng, brave):
    brave.fail_next(429, "RATE_LIMITED", times=2)
    run = run_main("search", "rust", "--engines", ENGINE, searxng_url=fresh_searxng.url)
    assert run.returncode != 0
    assert "RATE_LIMITED" in run.stderr
    assert "per-second rate limit" in run.stderr
    plan = json.loads(open(fresh_searxng.plan_file).read())
    assert plan["limited"] == "RATE_LIMITED"  # the plan file, as the web engine writes it
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        again = run_main("search", "rust", "--engines", ENGINE, searxng_url=fresh_searxng.url)
        if again.returncode == 0:
            return
        time.sleep(0.5)
    pytest.fail("the engine stayed suspended past Brave's reset delay")


# -- the chat service: a page already read ------------------------------------------------

ARTICLE = (
    "Pierogi are boiled until they float, then two minutes more. "
    "Fried pierogi are boiled first and browned in butter afterwards. "
    "Frozen pierogi need about seven minutes of boiling."
)


def page_on(pages, brave, text: str = ARTICLE) -> str:
    """The page server's article, as Brave has it in its index (the fake's corpus)."""
    url = f"{pages.url}/article"
    brave.corpus = (CorpusPage(url, "Pierogi, step by step", text, day="2026-02-20"),)
    return url


def tool_messages(llm) -> list[str]:
    return [m["content"] for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]


def test_an_answer_cites_the_passages_brave_read_without_reading_the_page(chat, llm, brave, pages):
    url = page_on(pages, brave)
    pages.requests.clear()
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi boiling"})]),
        Reply(text="Boil them until they float, then two minutes more [1]."),
    )
    conversation = new_conversation(chat, search_engines=ENGINE)
    events = send(chat, conversation, "How long do I boil pierogi?")
    search, ended = events[0], done(events)

    [told] = tool_messages(llm)
    assert "<untrusted-data" in told  # web text, never instructions
    assert f"[1] Pierogi, step by step\n{url}\n2026-02-20 — " in told
    assert "\n¶ Pierogi are boiled until they float, then two minutes more." in told
    assert search["read"] == [1]
    assert ended["sources"] == [
        {
            "url": url,
            "title": "Pierogi, step by step",
            "domain": "127.0.0.1",
            "date": "2026-02-20",
            "read": True,
        }
    ]
    assert pages.requests == []  # the page's server saw nobody from here
    assert [r.path for r in brave.requests] == [CONTEXT_PATH]


def searched_in_a_small_window(request, searxng, pages, tmp_path, query: str):
    """One answer searching bravellm for `query`, by a model whose window (2,500 tokens)
    cannot hold every passage: what the model was told, and the turn's events."""
    with FakeLLM(models=["fake-model"], n_ctx=2500) as small:
        env = chat_env(small, tmp_path, pages, MODELS="fake-model")
        with service_for(request, env, searxng.url) as chat:
            small.script(
                Reply(tool_calls=[ToolCall("web_search", {"query": query})]),
                Reply(text="About ten minutes [1]."),
            )
            conversation = new_conversation(chat, search_engines=ENGINE)
            events = send(chat, conversation, "How long?")
        [told] = tool_messages(small)
    assert done(events)["status"] == "complete"
    return told, events


def test_the_window_keeps_whole_passages(request, searxng, brave, pages, tmp_path):
    sentences = [
        f"Passage {n} says pierogi boil for {n} minutes in salted water." for n in range(400)
    ]
    page_on(pages, brave, " ".join(sentences))
    told, _ = searched_in_a_small_window(request, searxng, pages, tmp_path, "pierogi boil minutes")
    assert CUT_MARKER in told  # cut for the window...
    given = [line[2:] for line in told.split("\n") if line.startswith("¶ ")]
    assert given and all(passage in sentences for passage in given)  # ...between passages


def test_a_page_whose_passages_did_not_fit_is_not_read(request, searxng, brave, pages, tmp_path):
    # Fewer passages than Brave's 50 a search, more than the small window holds.
    long = " ".join(f"Passage {n} says pierogi boil for {n} minutes." for n in range(40))
    brave.corpus = (
        CorpusPage(f"{pages.url}/article", "Pierogi boil", f"Pierogi pierogi boil. {long}"),
        CorpusPage(f"{pages.url}/other", "Dumplings", "Dumplings boil too, pierogi say some."),
    )
    told, events = searched_in_a_small_window(request, searxng, pages, tmp_path, "pierogi boil")
    assert CUT_MARKER in told and "Dumplings boil too" not in told
    search, ended = events[0], done(events)
    assert [s["read"] for s in ended["sources"]] == [True, False]
    assert search["read"] == [1]  # the trail tells only the first as read through Brave


# -- research -----------------------------------------------------------------------------


@pytest.fixture
def context_only(brave, tmp_path) -> Iterator[EmbeddedSearxng]:
    """A SearXNG whose one default engine is bravellm."""
    with searching_with(brave, tmp_path / "searxng", ENGINE) as instance:
        yield instance


def test_research_notes_the_pages_brave_read_without_fetching_them(
    llm, pages, brave, context_only, tmp_path, monkeypatch
):
    url = page_on(pages, brave, f"{ARTICLE_QUOTE} of unleavened dough. {ARTICLE}")
    pages.requests.clear()
    scripted_on(llm, monkeypatch).report = "Pierogi are filled dumplings [1]."
    settings = chat_env(llm, tmp_path, pages, SEARCH_RATE="50")
    run = run_main("research", QUESTION, "--json", searxng_url=context_only.url, **settings)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["sources"][0] == {
        "n": 1,
        "url": url,
        "title": "Pierogi, step by step",
        "read": True,
    }
    assert "Pierogi are filled dumplings [1]." in result["report"]
    assert result["spent"]["pages"] == 1 and result["spent"]["searches"] == 1
    assert pages.requests == []  # noted from Brave's passages: the page was never fetched


def test_the_trail_says_the_pages_were_read_through_brave(
    request, browser, llm, brave, pages, context_only, tmp_path
):
    page_on(pages, brave)
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi boiling"})]),
        Reply(text="Until they float, then two minutes more [1]."),
    )
    with service_for(request, chat_env(llm, tmp_path, pages), context_only.url) as chat:
        with opened(browser, chat.url) as page:
            type_and_send(page, "How long do I boil pierogi?")
            wait_turn_end(page)
            trail = page.locator(".trail").last
            trail.locator("summary").click()
            step = trail.locator(".timeline li").first
            expect(step).to_contain_text("1 read through Brave, your address not shown")
            assert page.log.errors == []


def test_doctor_spends_no_llm_context_query_when_it_is_on(brave, tmp_path):
    with searching_with(brave, tmp_path, "braveweb", ENGINE) as both:
        run_main("doctor", searxng_url=both.url, LLM_BASE_URL="http://127.0.0.1:9/v1")
    assert brave.requests and context_requests(brave) == []  # only the key's one web query


def test_the_trail_numbers_the_pages_read_as_the_answer_cites_them(chat, llm, brave, pages):
    brave.corpus = tuple(
        CorpusPage(f"{pages.url}/{name}", f"Pierogi {name}", f"Pierogi {name} boil {n} minutes.")
        for n, name in enumerate(("fresh", "frozen"), 4)
    )
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi boil"})]),
        Reply(text="Frozen ones take longer [2]."),
    )
    conversation = new_conversation(chat, search_engines=ENGINE)
    assert done(send(chat, conversation, "Pierogi?"))["status"] == "complete"
    [answer] = [m for m in get_conversation(chat, conversation)["messages"] if m["role"] != "user"]
    [search] = answer["activity"]
    first_cited = answer["sources"][0]["url"]
    assert first_cited.endswith(search["results"][1]["url"].rsplit("/", 1)[-1])
    assert search["read"] == [2, 1]  # the trail's numbers are the answer's


def test_a_search_with_both_engines_counts_two_queries(searxng, brave):
    counted: list[str] = []

    async def count() -> None:
        counted.append("query")

    async def searched() -> None:
        async with Searxng(searxng.url, count=count) as client:
            await client.search("rust", engines=f"braveweb,{ENGINE}")

    # In a thread of its own: a browser test leaves Playwright's loop in this one.
    with ThreadPoolExecutor(max_workers=1) as thread:
        thread.submit(asyncio.run, searched()).result()
    assert len(brave.requests) == 2 and len(counted) == 2  # what the plan and doctor count
