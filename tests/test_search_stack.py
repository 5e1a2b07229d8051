"""A real SearXNG with our engine, against the fake Brave API: what reaches Brave, what
comes back, and how Brave's errors reach the command line and the plan file; each on the
pinned SearXNG and on the newest (tests/searxng_releases.py), through to a chat answer."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time

import httpx
import pytest

from app import config
from app.search.client import SearchResponse, Searxng
from app.search.embedded import EmbeddedSearxng, SearxngInstall, ensure_venv
from tests.chat_client import event_types, new_conversation, send
from tests.conftest import API_KEY, TLS, chat_env, run_main, searxng_env, service_for
from tests.fakes.llm_server import Reply, ToolCall
from tests.searxng_releases import (
    NEWEST,
    PINNED,
    RELEASES,
    each_fresh_searxng,
    each_searxng,
    install_of,
    newest_searxng,
)

# Fixtures, imported to be used here: each test runs on the pinned and the newest SearXNG.
__all__ = ["each_fresh_searxng", "each_searxng", "newest_searxng"]


DATED = re.compile(r"\d{4}-\d{2}-\d{2} — ")
SNIPPETS = " … "
"""What our engine adds to a result's content: its date in front, the extra snippets
joined (brave_api.DATE_SEPARATOR, SNIPPET_SEPARATOR)."""


def search(searxng: EmbeddedSearxng, **params: str) -> dict:
    response = httpx.get(
        f"{searxng.url}/search", params={"format": "json", **params}, timeout=30, verify=TLS
    )
    response.raise_for_status()
    return response.json()


def sent(brave) -> dict[str, str]:
    assert brave.requests, "the engine sent nothing to Brave"
    return brave.requests[-1].params


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("pl-PL", {"country": "PL", "search_lang": "pl", "ui_lang": "pl-PL"}),
        ("pl", {"search_lang": "pl"}),
        ("fr-FR", {"country": "FR", "search_lang": "fr", "ui_lang": "fr-FR"}),
        ("all", {}),
        ("ja", {"search_lang": "jp"}),
    ],
)
def test_client_locale_reaches_brave(each_searxng, brave, locale, expected):
    search(each_searxng, q=f"kubernetes {locale}", language=locale)
    params = sent(brave)
    assert {k: params[k] for k in ("country", "search_lang", "ui_lang") if k in params} == expected


def test_server_default_locale_applies_when_the_client_sends_none(each_searxng, brave):
    search(each_searxng, q="python asyncio")
    assert sent(brave)["country"] == "PL"
    assert sent(brave)["search_lang"] == "pl"


def test_client_locale_overrides_the_server_default(each_searxng, brave):
    search(each_searxng, q="python asyncio", language="fr-FR")
    assert sent(brave)["country"] == "FR"
    assert sent(brave)["ui_lang"] == "fr-FR"


def test_request_parameters_are_the_ones_brave_documents(each_searxng, brave):
    search(each_searxng, q="docker volumes", pageno="2", time_range="week", safesearch="2")
    request = brave.requests[-1]
    assert request.params["extra_snippets"] == "true"
    assert request.params["text_decorations"] == "false"
    assert 1 <= int(request.params["count"]) <= 20
    assert request.params["offset"] == "1"
    assert request.params["freshness"] == "pw"
    assert request.params["safesearch"] == "strict"
    assert request.headers["x-subscription-token"] == API_KEY


def test_first_page_is_offset_zero_and_safesearch_off_by_default(each_searxng, brave):
    search(each_searxng, q="docker volumes")
    assert sent(brave)["offset"] == "0"
    assert sent(brave)["safesearch"] == "off"
    assert "freshness" not in sent(brave)


def test_results_carry_date_description_and_extra_snippets(each_searxng, brave):
    results = search(each_searxng, q="postgresql index", language="en")["results"]
    raw = httpx.get(
        brave.endpoint, params=sent(brave), headers={"X-Subscription-Token": API_KEY}, verify=TLS
    ).json()["web"]["results"]
    by_url = {r["url"]: r for r in raw}
    assert results
    dated = [r for r in results if by_url[r["url"]].get("page_age")]
    assert dated, "the fake should date most results"
    for result in dated:
        original = by_url[result["url"]]
        day = original["page_age"][:10]
        assert result["content"].startswith(f"{day} — ")
        assert result["publishedDate"].startswith(day)
    for result in results:
        original = by_url[result["url"]]
        assert original["description"] in result["content"]
        for snippet in original.get("extra_snippets", [])[:5]:
            assert snippet in result["content"]
        # Repeated snippets appear once.
        parts = result["content"].split(" — ", 1)[-1].split(" … ")
        assert len(parts) == len(set(parts))


def test_the_plan_brave_states_is_written_for_the_chat_service(each_searxng, brave):
    brave.spend(500)  # spent elsewhere this month
    search(each_searxng, q="rust ownership")
    plan = json.loads(each_searxng.plan_file.read_text())
    assert plan["limit"] == [1, 15_000]
    assert plan["remaining"] == [0, 14_499]
    assert plan["policy"] == "1;w=1, 15000;w=2592000"
    assert plan["limited"] is None and time.time() - plan["read_at"] < 30


ONE_RESULT = """
import json
import brave_api


class Answer:  # Brave's answer with one result, as SearXNG hands it to the engine
    status_code = 200
    headers = {}

    def json(self):
        result = {"url": "https://example.org/a", "title": "A", "description": "About A."}
        result.update(page_age="2026-01-02T00:00:00", extra_snippets=["Also A."])
        return {"web": {"results": [result]}}
"""
OURS = "2026-01-02 — About A. … Also A."
"""That result's content as our engine writes it."""


def engine_in(release: str, script: str) -> object:
    """What the script prints, run with our engine in that release's SearXNG (no server)."""
    install = install_of(release) or SearxngInstall(config.load().searxng_venv)
    home = ensure_venv(install.venv, install.lock)
    run = subprocess.run(
        [str(install.venv / "bin" / "python"), "-c", ONE_RESULT + script],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": f"{home}:{config.ENGINE_FILE.parent}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize(("release", "kind"), [(PINNED, "dict"), (NEWEST, "MainResult")])
def test_results_are_typed_where_searxngs_merge_keeps_typed_results_whole(release, kind):
    """Typed (the newest SearXNG keeps a dict only as "LegacyResult, internal use only"),
    but dicts on 2025.8, whose merge of two typed results lost the first one's fields."""
    script = "results = brave_api.response(Answer())\n"
    script += 'print(json.dumps([[type(r).__name__, r["content"]] for r in results]))'
    assert engine_in(release, script) == [[kind, OURS]]


ALSO_FOUND_BY_BRAVEAPI = """
from searx import metrics
from searx.results import ResultContainer
from searx.result_types import MainResult

metrics.initialize(["braveweb", "braveapi"])
found = ResultContainer()
found.extend("braveweb", brave_api.response(Answer()))
# SearXNG's own braveapi finds the same page, with Brave's description alone
found.extend("braveapi", [MainResult(url="https://example.org/a", title="A", content="About A.")])
print(json.dumps([[r["content"], sorted(r["engines"])] for r in found.get_ordered_results()]))
"""


@pytest.mark.parametrize("release", RELEASES)
def test_a_page_searxngs_own_braveapi_also_found_keeps_our_snippets_and_date(release):
    assert engine_in(release, ALSO_FOUND_BY_BRAVEAPI) == [[OURS, ["braveapi", "braveweb"]]]


def test_rate_limit_reaches_the_cli_as_a_clear_error(each_fresh_searxng, brave):
    # Refused again when retried (app/search/searcher.py): the search fails, and says why.
    brave.fail_next(429, "RATE_LIMITED", times=2)
    run = run_main("search", "rust", searxng_url=each_fresh_searxng.url)
    assert run.returncode != 0
    assert "too many requests" in run.stderr
    assert "RATE_LIMITED" in run.stderr
    assert "per-second rate limit" in run.stderr  # named
    # While suspended (the month's quota: until the month resets), SearXNG says so
    # instead of calling Brave again.
    time.sleep(1.5)  # past the per-second suspension
    brave.fail_next(429, "QUOTA_LIMITED")
    assert run_main("search", "rust", searxng_url=each_fresh_searxng.url).returncode != 0
    calls = len(brave.requests)

    async def search() -> SearchResponse:
        async with Searxng(each_fresh_searxng.url) as client:
            return await client.search("rust")

    again = asyncio.run(search())
    assert not again.results and "Suspended" in again.engine_errors[0]
    assert len(brave.requests) == calls


def test_rate_limit_suspension_lasts_as_long_as_brave_says(each_fresh_searxng, brave):
    # The fake's X-RateLimit-Reset says a couple of seconds; without it SearXNG would
    # suspend the engine for an hour. Refused twice: the search's one retry fails too.
    brave.fail_next(429, "RATE_LIMITED", times=2)
    assert run_main("search", "rust", searxng_url=each_fresh_searxng.url).returncode != 0
    # The refusal reached the chat service's plan file too, with the end of its window.
    refused = json.loads(each_fresh_searxng.plan_file.read_text())
    assert refused["limited"] == "RATE_LIMITED"
    assert 0 < refused["limited_until"] - time.time() <= 1
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if run_main("search", "rust", searxng_url=each_fresh_searxng.url).returncode == 0:
            return
        time.sleep(0.5)
    pytest.fail("the engine stayed suspended past Brave's reset delay")


def test_invalid_token_reaches_the_cli_with_brave_code_and_detail(each_fresh_searxng, brave):
    brave.fail_next(422, "SUBSCRIPTION_TOKEN_INVALID")
    run = run_main("search", "rust", searxng_url=each_fresh_searxng.url)
    assert run.returncode != 0
    assert "SUBSCRIPTION_TOKEN_INVALID" in run.stderr
    assert "Brave API 422" in run.stderr


def test_a_detail_written_just_after_the_search_answered_is_still_named():
    # SearXNG marks the engine failed, then its thread writes the detail to /stats/errors:
    # a search that stopped waiting on that thread (a loaded machine) answers in between.
    entry = {
        "exception_classname": "searx.exceptions.SearxEngineAPIException",
        "log_parameters": ["Brave API 422: SUBSCRIPTION_TOKEN_INVALID"],
    }
    reads = []

    def stats(request: httpx.Request) -> httpx.Response:
        reads.append(request.url.path)
        return httpx.Response(200, json={"braveweb": [entry]} if len(reads) > 1 else {})

    async def explained():
        searxng = Searxng("http://searxng.test")
        searxng.http = httpx.AsyncClient(base_url=searxng.url, transport=httpx.MockTransport(stats))
        async with searxng:
            return await searxng.explain([("braveweb", "server API error")])

    [failure] = asyncio.run(explained())
    assert failure.details == ("Brave API 422: SUBSCRIPTION_TOKEN_INVALID",)
    assert reads == ["/stats/errors", "/stats/errors"]


def test_validation_error_names_the_field(each_fresh_searxng, brave):
    brave.fail_next(422, "VALIDATION")
    run = run_main("search", "rust", searxng_url=each_fresh_searxng.url)
    assert run.returncode != 0
    assert "VALIDATION" in run.stderr


def test_missing_api_key_is_named(brave):
    env = {k: v for k, v in searxng_env(brave).items() if k != "BRAVE_API_KEY"}
    with EmbeddedSearxng("all", environ=env) as keyless:
        # Without a key our engine is off by default (key-free engines search instead);
        # asked for by name, it says what is missing.
        run = run_main(
            "search", "rust", "--engines", "braveweb", searxng_url=keyless.url, BRAVE_API_KEY=""
        )
    assert run.returncode != 0
    assert "BRAVE_API_KEY" in run.stderr
    assert brave.requests == []


def test_unreachable_searxng_is_a_clear_error():
    run = run_main("search", "rust", searxng_url="http://127.0.0.1:9")
    assert run.returncode != 0
    assert "SearXNG is not reachable at http://127.0.0.1:9" in run.stderr


def test_search_prints_date_title_url_and_content(each_searxng, brave):
    run = run_main("search", "linux kernel", "--locale", "en", searxng_url=each_searxng.url)
    assert run.returncode == 0, run.stderr
    first = run.stdout.splitlines()[0]
    assert re.match(r"^(\d{4}-\d{2}-\d{2}|-{10})  \S", first)
    assert "  https://" in run.stdout


def test_search_json_lists_the_documented_fields(each_searxng, brave):
    run = run_main("search", "linux kernel", "--json", "--page", "2", searxng_url=each_searxng.url)
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)
    assert results
    assert set(results[0]) == {"title", "url", "content", "publishedDate", "engine"}
    assert {r["engine"] for r in results} == {"braveweb"}
    assert sent(brave)["offset"] == "1"


def test_a_chat_answer_searches_through_each_searxng(each_searxng, request, llm, pages, tmp_path):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "postgresql index"})]),
        Reply(text="Index the columns you filter on [1]."),
    )
    env = chat_env(llm, tmp_path, pages, SEARCH_LOCALE="en")
    with service_for(request, env, each_searxng.url) as chat:
        events = send(chat, new_conversation(chat), "How do I speed up a slow query?")
    assert event_types(events) == ["search", "delta", "done"]
    assert events[0]["results"] and events[-1]["status"] == "complete"
    given = llm.requests[1].body["messages"][-1]
    assert given["role"] == "tool" and "Results for 'postgresql index'" in given["content"]
    assert DATED.search(given["content"])  # the date our engine put in front
    assert SNIPPETS in given["content"]  # and the extra snippets it joined
