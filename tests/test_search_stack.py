"""A real SearXNG with our engine, against the fake Brave API: what reaches Brave, what
comes back, and how Brave's errors reach the command line."""

from __future__ import annotations

import asyncio
import json
import re
import time

import httpx
import pytest

from app.search.client import SearchResponse, Searxng
from app.search.embedded import EmbeddedSearxng
from tests.conftest import API_KEY, run_main, searxng_env


def search(searxng: EmbeddedSearxng, **params: str) -> dict:
    response = httpx.get(f"{searxng.url}/search", params={"format": "json", **params}, timeout=30)
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
def test_client_locale_reaches_brave(searxng, brave, locale, expected):
    search(searxng, q=f"kubernetes {locale}", language=locale)
    params = sent(brave)
    assert {k: params[k] for k in ("country", "search_lang", "ui_lang") if k in params} == expected


def test_server_default_locale_applies_when_the_client_sends_none(searxng, brave):
    search(searxng, q="python asyncio")
    assert sent(brave)["country"] == "PL"
    assert sent(brave)["search_lang"] == "pl"


def test_client_locale_overrides_the_server_default(searxng, brave):
    search(searxng, q="python asyncio", language="fr-FR")
    assert sent(brave)["country"] == "FR"
    assert sent(brave)["ui_lang"] == "fr-FR"


def test_request_parameters_are_the_ones_brave_documents(searxng, brave):
    search(searxng, q="docker volumes", pageno="2", time_range="week", safesearch="2")
    request = brave.requests[-1]
    assert request.params["extra_snippets"] == "true"
    assert request.params["text_decorations"] == "false"
    assert 1 <= int(request.params["count"]) <= 20
    assert request.params["offset"] == "1"
    assert request.params["freshness"] == "pw"
    assert request.params["safesearch"] == "strict"
    assert request.headers["x-subscription-token"] == API_KEY


def test_first_page_is_offset_zero_and_safesearch_off_by_default(searxng, brave):
    search(searxng, q="docker volumes")
    assert sent(brave)["offset"] == "0"
    assert sent(brave)["safesearch"] == "off"
    assert "freshness" not in sent(brave)


def test_results_carry_date_description_and_extra_snippets(searxng, brave):
    results = search(searxng, q="postgresql index", language="en")["results"]
    raw = httpx.get(
        brave.endpoint, params=sent(brave), headers={"X-Subscription-Token": API_KEY}
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


def test_rate_limit_reaches_the_cli_as_a_clear_error(fresh_searxng, brave):
    # Refused again when retried (app/search/searcher.py): the search fails, and says why.
    brave.fail_next(429, "RATE_LIMITED", times=2)
    run = run_main("search", "rust", searxng_url=fresh_searxng.url)
    assert run.returncode != 0
    assert "too many requests" in run.stderr
    assert "RATE_LIMITED" in run.stderr
    assert "per-second rate limit" in run.stderr  # named
    # While suspended (the month's quota: until the month resets), SearXNG says so
    # instead of calling Brave again.
    time.sleep(1.5)  # past the per-second suspension
    brave.fail_next(429, "QUOTA_LIMITED")
    assert run_main("search", "rust", searxng_url=fresh_searxng.url).returncode != 0
    calls = len(brave.requests)

    async def search() -> SearchResponse:
        async with Searxng(fresh_searxng.url) as client:
            return await client.search("rust")

    again = asyncio.run(search())
    assert not again.results and "Suspended" in again.engine_errors[0]
    assert len(brave.requests) == calls


def test_rate_limit_suspension_lasts_as_long_as_brave_says(fresh_searxng, brave):
    # The fake's X-RateLimit-Reset says a couple of seconds; without it SearXNG would
    # suspend the engine for an hour. Refused twice: the search's one retry fails too.
    brave.fail_next(429, "RATE_LIMITED", times=2)
    assert run_main("search", "rust", searxng_url=fresh_searxng.url).returncode != 0
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if run_main("search", "rust", searxng_url=fresh_searxng.url).returncode == 0:
            return
        time.sleep(0.5)
    pytest.fail("the engine stayed suspended past Brave's reset delay")


def test_invalid_token_reaches_the_cli_with_brave_code_and_detail(fresh_searxng, brave):
    brave.fail_next(422, "SUBSCRIPTION_TOKEN_INVALID")
    run = run_main("search", "rust", searxng_url=fresh_searxng.url)
    assert run.returncode != 0
    assert "SUBSCRIPTION_TOKEN_INVALID" in run.stderr
    assert "Brave API 422" in run.stderr


def test_validation_error_names_the_field(fresh_searxng, brave):
    brave.fail_next(422, "VALIDATION")
    run = run_main("search", "rust", searxng_url=fresh_searxng.url)
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


def test_search_prints_date_title_url_and_content(searxng, brave):
    run = run_main("search", "linux kernel", "--locale", "en", searxng_url=searxng.url)
    assert run.returncode == 0, run.stderr
    first = run.stdout.splitlines()[0]
    assert re.match(r"^(\d{4}-\d{2}-\d{2}|-{10})  \S", first)
    assert "  https://" in run.stdout


def test_search_json_lists_the_documented_fields(searxng, brave):
    run = run_main("search", "linux kernel", "--json", "--page", "2", searxng_url=searxng.url)
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)
    assert results
    assert set(results[0]) == {"title", "url", "content", "publishedDate", "engine"}
    assert {r["engine"] for r in results} == {"braveweb"}
    assert sent(brave)["offset"] == "1"
