"""The Brave engine's pure functions, imported without SearXNG."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime
from types import ModuleType

import pytest

from app import config
from app.search.plan import PlanReader, summary
from tests.conftest import shared_path


def load_engine() -> ModuleType:
    spec = importlib.util.spec_from_file_location("brave_api", config.ENGINE_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


engine = load_engine()


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("pl-PL", {"country": "PL", "search_lang": "pl", "ui_lang": "pl-PL"}),
        ("pl", {"search_lang": "pl"}),
        ("fr-FR", {"country": "FR", "search_lang": "fr", "ui_lang": "fr-FR"}),
        ("fr", {"search_lang": "fr"}),
        ("all", {}),
        ("auto", {}),
        ("", {}),
        (None, {}),
        ("ja", {"search_lang": "jp"}),
        ("ja-JP", {"country": "JP", "search_lang": "jp", "ui_lang": "ja-JP"}),
        ("zh-TW", {"country": "TW", "search_lang": "zh-hant", "ui_lang": "zh-TW"}),
        ("zh", {"search_lang": "zh-hans"}),
        ("pt-BR", {"country": "BR", "search_lang": "pt-br", "ui_lang": "pt-BR"}),
        ("pt", {"search_lang": "pt-pt"}),
        ("en-GB", {"country": "GB", "search_lang": "en-gb", "ui_lang": "en-GB"}),
        ("nn", {"search_lang": "nb"}),
        # Brave has no Swahili index and no Kenyan market: nothing it would refuse is sent.
        ("sw-KE", {}),
        # A country Brave lacks keeps the language it has.
        ("fr-LU", {"search_lang": "fr"}),
    ],
)
def test_locale_maps_to_brave_parameters(locale, expected):
    assert engine.locale_params(locale) == expected


def test_request_uses_the_real_api_parameters():
    params = engine.request_params(
        "rust async", locale="pl-PL", pageno=2, time_range="week", safe_search=2, count=50
    )
    assert params["offset"] == "1"  # a page index, not a result offset
    assert params["count"] == "20"  # Brave refuses more
    assert params["freshness"] == "pw"
    assert params["safesearch"] == "strict"
    assert params["text_decorations"] == "false"
    assert params["extra_snippets"] == "true"
    assert params["country"] == "PL"


@pytest.mark.parametrize(
    "given",
    [
        "https://brave.example",
        "https://brave.example/",
        "https://brave.example/res/v1/web/search",
        "https://brave.example/res/v1/llm/context/",
        "https://brave.example/res/v1",
    ],
)
def test_brave_api_url_is_the_root_or_any_endpoint(monkeypatch, given):
    """Upstream SearXNG's engine takes the endpoint, ours the root: either reaches
    /res/v1/web/search once (not .../web/search/res/v1/web/search)."""
    monkeypatch.setenv("BRAVE_API_URL", given)
    monkeypatch.setenv("BRAVE_API_KEY", "key")
    params: dict = {"searxng_locale": "pl-PL", "pageno": 1, "headers": {}}
    engine.request("żurek", params)
    assert params["url"].split("?")[0] == "https://brave.example/res/v1/web/search"


@pytest.mark.parametrize(
    "given",
    [
        "",
        "https://api.search.brave.com",
        "https://api.search.brave.com/res/v1/web/search",
        "https://api.search.brave.com/res/v1/llm/context",
        "http://127.0.0.1:8765",
        "http://proxy.lan:8080/brave/res/v1/web/search/",
    ],
)
def test_the_service_takes_brave_api_url_as_root_or_endpoint(given):
    assert config.brave_api_url(given) == given


def test_brave_api_url_behind_a_proxy_keeps_its_path(monkeypatch):
    monkeypatch.setenv("BRAVE_API_URL", "http://proxy.lan:8080/brave/res/v1/web/search")
    monkeypatch.setenv("BRAVE_API_KEY", "key")
    params: dict = {"searxng_locale": "all", "pageno": 1, "headers": {}}
    engine.request("q", params)
    assert params["url"].split("?")[0] == "http://proxy.lan:8080/brave/res/v1/web/search"


@pytest.mark.parametrize(("level", "word"), [(0, "off"), (1, "moderate"), (2, "strict")])
def test_safesearch_levels_become_words(level, word):
    assert engine.request_params("q", locale="all", safe_search=level)["safesearch"] == word


@pytest.mark.parametrize(
    ("time_range", "freshness"), [("day", "pd"), ("month", "pm"), ("year", "py")]
)
def test_time_ranges_become_freshness(time_range, freshness):
    assert engine.request_params("q", locale="all", time_range=time_range)["freshness"] == freshness


def test_page_beyond_the_tenth_is_clamped_to_brave_last_page():
    assert engine.request_params("q", locale="all", pageno=15)["offset"] == "9"


def test_content_joins_snippets_without_repeats_or_html():
    result = {
        "url": "https://example.org/a",
        "title": "<strong>Docker</strong> &amp; Compose",
        "description": "Compose runs <strong>several</strong> containers.",
        "extra_snippets": [
            "Each service gets its own container.",
            "Compose runs several containers.",
            "Each service gets its own container.",
            "Volumes keep data across restarts.",
        ],
        "page_age": "2025-03-14T09:21:00",
    }
    formatted = engine.format_result(result)
    assert formatted["title"] == "Docker & Compose"
    assert formatted["content"] == (
        "2025-03-14 — Compose runs several containers. … Each service gets its own container."
        " … Volumes keep data across restarts."
    )
    assert formatted["publishedDate"] == datetime(2025, 3, 14)


def test_at_most_five_extra_snippets():
    result = {
        "url": "https://example.org/",
        "description": "d",
        "extra_snippets": [f"snippet number {i}" for i in range(8)],
    }
    assert engine.format_result(result)["content"].count(" … ") == 5


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"page_age": "2024-11-02T00:00:00", "age": "3 days ago"}, datetime(2024, 11, 2)),
        ({"age": "March 14, 2025"}, datetime(2025, 3, 14)),
        ({"age": "2 days ago"}, None),
        ({}, None),
    ],
)
def test_publication_date_trusts_only_absolute_dates(fields, expected):
    assert engine.published_date(fields) == expected


def test_result_without_date_has_no_prefix_and_no_published_date():
    formatted = engine.format_result({"url": "https://x.org/", "description": "Plain."})
    assert formatted["content"] == "Plain."
    assert "publishedDate" not in formatted


def test_rate_limit_reset_takes_the_exhausted_window():
    per_second = {
        "x-ratelimit-limit": "1, 15000",
        "x-ratelimit-remaining": "0, 14990",
        "x-ratelimit-reset": "1, 2528987",
    }
    monthly = {
        "x-ratelimit-limit": "1, 15000",
        "x-ratelimit-remaining": "1, 0",
        "x-ratelimit-reset": "1, 2528987",
    }
    # A monthly limit of 0 means no monthly cap: its remaining 0 is not exhaustion.
    uncapped = {
        "x-ratelimit-limit": "50, 0",
        "x-ratelimit-remaining": "0, 0",
        "x-ratelimit-reset": "1, 2528987",
    }
    assert engine.rate_limit_reset(per_second) == 1
    assert engine.rate_limit_reset(monthly) == 2528987
    assert engine.rate_limit_reset(uncapped) == 1
    assert engine.rate_limit_reset({}) is None


def test_a_429_suspends_for_the_window_its_code_names():
    # Both windows exhausted: the code says which one Brave refused for.
    both = {
        "x-ratelimit-limit": "1, 2000",
        "x-ratelimit-remaining": "0, 0",
        "x-ratelimit-reset": "1, 2528987",
    }
    assert engine.rate_limit_reset(both, "RATE_LIMITED") == 1
    assert engine.rate_limit_reset(both, "QUOTA_LIMITED") == 2528987
    assert engine.error_code({"error": {"code": "QUOTA_LIMITED"}}) == "QUOTA_LIMITED"
    assert engine.error_code(None) is None


# As recorded from the real API (../shared/corpus/brave/SOURCE.md).
RECORDED_HEADERS = {
    "x-ratelimit-limit": "50, 0",
    "x-ratelimit-remaining": "49, 0",
    "x-ratelimit-reset": "1, 2528987",
    "x-ratelimit-policy": "50;w=1, 0;w=2592000",
}


def test_the_plan_is_read_from_the_recorded_headers_without_a_monthly_cap(tmp_path):
    record = engine.plan_record(RECORDED_HEADERS, 200, None, now=1_700_000_000.0)
    path = tmp_path / "brave-plan.json"
    engine.write_plan(record, str(path))
    assert path.stat().st_mode & 0o777 == 0o644  # the chat user reads SearXNG's file
    assert [p.name for p in tmp_path.iterdir()] == ["brave-plan.json"]  # no temporary left
    plan = PlanReader(path).read()
    assert plan.rate == 50
    assert plan.monthly_limit is None and plan.monthly_remaining is None and not plan.low
    assert plan.resets_at == datetime.fromtimestamp(1_700_000_000 + 2528987, UTC)
    assert PlanReader(path).plan_rate() == 50
    assert PlanReader(path, rate=0.5).plan_rate() == 0.5  # SEARCH_RATE overrides


def test_a_free_plan_nearly_spent_warns_and_a_quota_429_says_until_when(tmp_path):
    path = tmp_path / "brave-plan.json"
    assert PlanReader(path).read() is None
    assert PlanReader(path).plan_rate() == 1.0  # the free plan's, before any answer
    headers = {
        "x-ratelimit-limit": "1, 2000",
        "x-ratelimit-remaining": "0, 150",
        "x-ratelimit-reset": "1, 86400",
        "x-ratelimit-policy": "1;w=1, 2000;w=2592000",
    }
    now = datetime.now(UTC).timestamp()
    engine.write_plan(engine.plan_record(headers, 200, None, now=now), str(path))
    reader = PlanReader(path)
    plan = reader.read()
    assert (plan.rate, plan.monthly_limit, plan.monthly_remaining) == (1, 2000, 150)
    assert plan.low and plan.limited_now() is None
    assert "150 of 2,000 queries left this month" in summary(plan)
    spent = {**headers, "x-ratelimit-remaining": "0, 0"}
    engine.write_plan(engine.plan_record(spent, 429, "QUOTA_LIMITED", now=now), str(path))
    plan = reader.read()  # read again: the file changed
    assert plan.limited_now() == "QUOTA_LIMITED"
    assert abs(plan.limited_until.timestamp() - (now + 86400)) < 1


def test_error_message_names_code_detail_and_fields():
    body = {
        "type": "ErrorResponse",
        "error": {
            "status": 422,
            "code": "VALIDATION",
            "detail": "Unable to validate request parameter(s).",
            "meta": {"errors": [{"loc": ["query", "count"], "msg": "Input should be <= 20"}]},
        },
    }
    assert engine.error_message(422, body) == (
        "Brave API 422 VALIDATION: Unable to validate request parameter(s). "
        "(count: Input should be <= 20)"
    )
    assert engine.error_message(502, None) == "Brave API HTTP 502"


def test_no_public_attribute_is_none():
    # SearXNG rejects an engine with any public module attribute equal to None.
    public = {name: getattr(engine, name) for name in dir(engine) if not name.startswith("_")}
    assert [name for name, value in public.items() if value is None] == []


def recorded(name: str) -> dict:
    return json.loads(shared_path("corpus", "brave", name).read_text())


def test_recorded_response_with_extra_snippets_gives_four_times_more_text():
    results = recorded("bestak_kotlin_coroutines_en.json")["web"]["results"]
    ours = sum(len(engine.joined_content(r)) for r in results)
    stock = sum(len(engine.clean_text(r.get("description"))) for r in results)
    assert ours / stock > 4.0


def test_recorded_response_without_extra_snippets_keeps_every_result():
    results = recorded("larallama_laravel_en.json")["web"]["results"]
    formatted = [engine.format_result(r) for r in results]
    assert len(formatted) == len(results)
    assert all(f["content"] for f in formatted)
    # Relative ages ("2 days ago") give no date rather than a wrong one.
    assert all(
        "publishedDate" not in f
        for f, r in zip(formatted, results, strict=True)
        if not r.get("page_age")
    )


def test_init_names_a_missing_key_once_at_start(monkeypatch):
    fresh = load_engine()
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    said: list[str] = []

    class Logger:
        def error(self, message: str) -> None:
            said.append(message)

    fresh.logger = Logger()
    assert fresh.init({}) is False
    assert said == ["no Brave API key: set BRAVE_API_KEY (or api_key in settings.yml)"]
    monkeypatch.setenv("BRAVE_API_KEY", "from-the-environment")
    assert fresh.init({}) is True and fresh.token() == "from-the-environment"
    fresh.api_key = "from-settings"
    assert fresh.token() == "from-settings"
