"""The search lab: its API against the real SearXNG and the fake Brave index, and its view
in Chromium (search, locale comparison chart, CSV download)."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import httpx
import pytest

from tests.browser import opened
from tests.conftest import ChatService, chat_env, run_main

# The fake Brave index answers a Polish query with a share of Polish results that rises
# from no locale, to the language, to language and country (tests/fakes/brave_api.py).
QUERY = "konfiguracja serwera"
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def lab(chat: Any, route: str, **params: str) -> httpx.Response:
    return chat.http.get(f"/api/lab/{route}", params=params, timeout=60)


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return response.json()


# -- API ---------------------------------------------------------------------------------------


def test_search_returns_results_as_the_model_gets_them(chat, brave):
    body = ok(lab(chat, "search", q=QUERY, locale="pl-PL"))
    assert body["query"] == QUERY
    assert body["locale"] == "pl-PL"
    assert body["target"] == "pl"
    assert body["engine_errors"] == []
    results = body["results"]
    assert len(results) >= 10
    assert set(results[0]) == {"title", "url", "domain", "content", "date", "language", "engine"}
    dated = [r for r in results if r["date"]]
    assert dated, "the fake dates most results"
    for result in dated:
        assert DAY.match(result["date"])
        assert result["content"].startswith(f"{result['date']} — ")  # as the engine writes it
    for result in results:
        assert result["domain"] and result["domain"] in result["url"]
        assert result["engine"] == "braveweb"
    languages = [r["language"] for r in results]
    assert languages.count("pl") > len(languages) / 2, languages
    assert set(languages) <= {"pl", "en", "fr"}
    # The locale reached Brave as it does for the model's searches.
    assert brave.requests[-1].params["country"] == "PL"
    assert brave.requests[-1].params["search_lang"] == "pl"


def test_search_without_a_locale_uses_search_locale(chat, brave):
    body = ok(lab(chat, "search", q=QUERY))
    assert body["locale"] == "pl-PL"
    assert brave.requests[-1].params["country"] == "PL"


def test_search_in_another_locale_gives_its_language(chat):
    body = ok(lab(chat, "search", q="configuration du serveur", locale="fr-fr"))
    assert body["locale"] == "fr-FR"  # spelled as SearXNG wants it
    languages = [r["language"] for r in body["results"]]
    assert languages.count("fr") > len(languages) / 2, languages


def test_measure_matches_the_command_line(chat, searxng):
    body = ok(lab(chat, "measure", q=QUERY, top="20"))
    assert body["query"] == QUERY
    assert body["target"] == "pl"
    assert body["top"] == 20
    assert body["locales"] == ["all", "pl", "pl-PL"]  # all, the language, SEARCH_LOCALE
    rows = body["rows"]
    assert [r["locale"] for r in rows] == ["all", "pl", "pl-PL"]
    counts = [r["in_target"] for r in rows]
    assert counts[0] < counts[1] < counts[2], counts
    for row in rows:
        assert row["total"] == 20 and len(row["results"]) == 20
        assert row["in_target"] == sum(r["language"] == "pl" for r in row["results"])

    run = run_main(
        "measure-locale",
        QUERY,
        "--locales",
        "all,pl,pl-PL",
        "--json",
        searxng_url=searxng.url,
    )
    assert run.returncode == 0, run.stderr
    cli = json.loads(run.stdout)
    assert [(r["locale"], r["in_target"], r["total"]) for r in cli["rows"]] == [
        (r["locale"], r["in_target"], r["total"]) for r in rows
    ]
    assert cli["rows"] == rows  # the same results, the same languages


def test_measure_takes_locales_target_and_top(chat):
    body = ok(lab(chat, "measure", q="configuration du serveur", locales="fr, fr-fr", top="5"))
    assert body["target"] == "fr"
    assert [r["locale"] for r in body["rows"]] == ["fr", "fr-FR"]
    assert [r["total"] for r in body["rows"]] == [5, 5]

    body = ok(lab(chat, "measure", q=QUERY, locales="pl-PL", target="en", top="10"))
    assert body["target"] == "en"
    row = body["rows"][0]
    assert row["in_target"] == sum(r["language"] == "en" for r in row["results"])
    assert row["in_target"] < row["total"]


def test_measure_counts_the_users_language_when_the_locales_name_none(chat):
    alone = ok(lab(chat, "measure", q="konfiguracja serwera", locale="all", top="3"))
    assert alone["locales"] == ["all"] and alone["target"] == "pl"  # SEARCH_LOCALE is pl-PL
    mixed = ok(lab(chat, "measure", q="konfiguracja serwera", locales="pl,all", top="3"))
    assert mixed["target"] == "pl"


def test_measure_defaults_follow_the_chosen_locale(chat):
    body = ok(lab(chat, "measure", q="configuration du serveur", locale="fr-FR", top="3"))
    assert body["locales"] == ["all", "fr", "fr-FR"]
    assert body["target"] == "fr"


@pytest.mark.parametrize(
    ("route", "params", "words"),
    [
        ("search", {"q": "x", "locale": "polish!"}, "invalid search locale 'polish!'"),
        ("search", {"q": "   "}, "the query is empty"),
        ("search", {"q": "x", "page": "11"}, "page must be a whole number from 1 to 10"),
        ("measure", {"q": "x", "locales": "all,xx_YY"}, "invalid search locale 'xx_YY'"),
        ("measure", {"q": "x", "locales": "pl", "locale": "Yã"}, "invalid search locale 'Yã'"),
        ("measure", {"q": ""}, "the query is empty"),
        ("measure", {"q": "x", "top": "0"}, "top must be a whole number from 1 to 50"),
        ("measure", {"q": "x", "top": "51"}, "top must be a whole number from 1 to 50"),
        ("measure", {"q": "x", "top": "many"}, "top must be a whole number"),
    ],
)
def test_bad_input_is_a_400_with_a_clear_message(chat, brave, route, params, words):
    response = lab(chat, route, **params)
    assert response.status_code == 400, response.text
    assert words in response.json()["detail"]
    assert brave.requests == []  # refused before anything was searched


def test_unreachable_searxng_is_a_502_naming_it(llm, pages, tmp_path):
    service = ChatService(chat_env(llm, tmp_path, pages), "http://127.0.0.1:9", socket=False)
    service.start()
    try:
        for route in ("search", "measure"):
            response = lab(service, route, q=QUERY)
            assert response.status_code == 502, response.text
            assert "SearXNG is not reachable at http://127.0.0.1:9" in response.json()["detail"]
    finally:
        service.stop()


def test_engine_failure_is_a_502_with_brave_words(llm, pages, tmp_path, fresh_searxng, brave):
    service = ChatService(chat_env(llm, tmp_path, pages), fresh_searxng.url, socket=False)
    service.start()
    try:
        brave.fail_next(422, "SUBSCRIPTION_TOKEN_INVALID")
        response = lab(service, "search", q="rust", locale="en")
        assert response.status_code == 502, response.text
        detail = response.json()["detail"]
        assert detail.startswith("braveweb: ")
        assert "SUBSCRIPTION_TOKEN_INVALID" in detail

        brave.fail_next(422, "SUBSCRIPTION_TOKEN_INVALID")
        response = lab(service, "measure", q="rust", locales="en", top="5")
        assert response.status_code == 502, response.text
        assert "SUBSCRIPTION_TOKEN_INVALID" in response.json()["detail"]
    finally:
        service.stop()


# -- the view ----------------------------------------------------------------------------------


def open_lab(page: Any, url: str) -> Any:
    """The lab through the page's own route, with SEARCH_LOCALE filled in from /api/config.

    The page first checks the status once, and opens #/status by itself when SearXNG or the
    model server is down; the lab is opened after that check has been shown."""
    from playwright.sync_api import expect

    # The check's end, however long its probes of SearXNG and the model server take.
    dots = page.locator("#status-dots")
    expect(dots).not_to_have_attribute("aria-label", "status unknown", timeout=30_000)
    page.goto(f"{url}/#/lab")
    expect(page.locator("#view-lab")).to_be_visible()
    expect(page.locator("#lab-locale")).to_have_value("pl-PL")
    return page


def run_search(page: Any, query: str, locale: str | None = None) -> None:
    page.fill("#lab-query", query)
    if locale is not None:
        page.fill("#lab-locale", locale)
    run(page, ".lab-actions button[type=submit]")


def compare(page: Any, query: str) -> None:
    page.fill("#lab-query", query)
    run(page, ".lab-compare-button")


def run(page: Any, button: str) -> None:
    """Click the lab's button and wait until what it asked ended, one way or another (the
    button is no longer busy): a comparison is three searches, slow on a busy machine."""
    from playwright.sync_api import expect

    page.click(button)
    expect(page.locator(button)).not_to_have_attribute("aria-busy", "true", timeout=60_000)


def test_search_shows_dated_results_with_their_languages(page, chat):
    from playwright.sync_api import expect

    open_lab(page, chat.url)
    # The Fresh box sits under its label's first letter, a box's size, not stretched
    # across its column with the box drawn in the middle.
    fresh, label = (
        page.locator("#lab-fresh").bounding_box(),
        page.locator("label[for='lab-fresh']").bounding_box(),
    )
    assert fresh and label and abs(fresh["x"] - label["x"]) <= 4 and fresh["width"] < 30, fresh
    run_search(page, QUERY)
    expect(page.locator(".lab-result").first).to_be_visible()
    expected = ok(lab(chat, "search", q=QUERY, locale="pl-PL"))["results"]
    items = page.locator(".lab-result")
    assert items.count() == len(expected)
    shown = [
        {
            "title": item.locator(".lab-title").inner_text(),
            "domain": item.locator(".lab-domain").inner_text(),
            "date": item.locator(".lab-date").inner_text(),
            "language": item.locator(".lab-lang").inner_text(),
            "content": item.locator(".lab-snippet").inner_text(),
        }
        for item in items.all()
    ]
    assert shown == [
        {
            "title": r["title"],
            "domain": r["domain"],
            "date": r["date"] or "no date",
            "language": r["language"],
            "content": r["content"],
        }
        for r in expected
    ]
    assert any(DAY.match(s["date"]) for s in shown)
    # The locale's language stands out; the others do not.
    matching = page.locator(".lab-lang.match")
    assert matching.count() == sum(r["language"] == "pl" for r in expected) > 0
    assert set(matching.all_inner_texts()) == {"pl"}
    summary = page.locator(".lab-results .lab-summary").inner_text()
    assert f"{matching.count()} of {len(expected)} in “pl”" in summary
    for link in page.locator("a.lab-title").all():
        assert link.get_attribute("rel") == "noopener noreferrer"
        assert link.get_attribute("target") == "_blank"
        assert link.get_attribute("href").startswith("https://")
    expect(page.locator(".lab-error")).to_be_hidden()
    assert page.log.outside() == []
    assert page.log.errors == []


def test_compare_locales_draws_the_measurement_and_downloads_it(page, chat):
    from playwright.sync_api import expect

    open_lab(page, chat.url)
    expect(page.locator("#lab-locales")).to_have_attribute("placeholder", "all,pl,pl-PL")
    compare(page, QUERY)
    bars = page.locator(".lab-chart svg .lab-bar")
    expect(bars).to_have_count(3)
    measured = ok(lab(chat, "measure", q=QUERY, locale="pl-PL", top="20"))
    rows = measured["rows"]
    assert [r["locale"] for r in rows] == ["all", "pl", "pl-PL"]
    assert [bar.get_attribute("data-locale") for bar in bars.all()] == [r["locale"] for r in rows]
    assert [bar.locator(".lab-bar-label").text_content() for bar in bars.all()] == [
        r["locale"] for r in rows
    ]
    values = [f"{r['in_target']}/{r['total']}" for r in rows]
    assert [bar.locator(".lab-bar-value").text_content() for bar in bars.all()] == values
    # Bar lengths follow the shares: all < pl < pl-PL in the fake index.
    widths = [float(bar.locator(".lab-bar-fill").get_attribute("width")) for bar in bars.all()]
    assert widths == sorted(widths) and widths[0] < widths[-1]
    label = page.locator(".lab-chart svg").get_attribute("aria-label")
    for row in rows:
        assert f"{row['locale']}: {row['in_target']} of {row['total']}" in label
    table = [
        [cell.inner_text() for cell in tr.locator("th, td").all()]
        for tr in page.locator(".lab-table tbody tr").all()
    ]
    assert table == [
        [
            r["locale"],
            str(r["in_target"]),
            str(r["total"]),
            f"{round(100 * r['in_target'] / r['total'])}%",
        ]
        for r in rows
    ]

    with page.expect_download() as info:
        page.click(".lab-csv")
    download = info.value
    assert download.failure() is None
    assert download.suggested_filename.endswith(".csv")
    text = open(download.path(), encoding="utf-8-sig").read()
    lines = list(csv.DictReader(io.StringIO(text)))
    assert [
        (line["query"], line["locale"], line["target"], line["in_target"], line["total"])
        for line in lines
    ] == [(QUERY, r["locale"], "pl", str(r["in_target"]), str(r["total"])) for r in rows]
    assert page.log.outside() == []
    assert page.log.errors == []


def test_errors_show_the_service_message(page, chat, llm, pages, tmp_path, browser):
    from playwright.sync_api import expect

    open_lab(page, chat.url)
    run_search(page, QUERY, locale="polish!")
    error = page.locator(".lab-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("Search failed")
    expect(error).to_contain_text("invalid search locale 'polish!'")

    # A failed comparison hides no earlier search, and a good search clears the error.
    run_search(page, QUERY, locale="pl-PL")
    expect(error).to_be_hidden()
    expect(page.locator(".lab-result").first).to_be_visible()

    # Its own DATA_DIR: sharing the first one's, it would answer from its search cache.
    dead = ChatService(chat_env(llm, tmp_path / "dead", pages), "http://127.0.0.1:9").start()
    try:
        with opened(browser, dead.url) as other:
            open_lab(other, dead.url)
            run_search(other, QUERY)
            error = other.locator(".lab-error")
            expect(error).to_contain_text("SearXNG is not reachable at http://127.0.0.1:9")
            expect(error.locator("a[href='#/status']")).to_be_visible()
            expect(other.locator(".lab-results")).to_be_hidden()
            compare(other, QUERY)
            expect(error).to_contain_text("Comparison failed")
            assert other.log.outside() == []
            # The page logs the failed fetches (HTTP 502) and nothing else.
            assert all("502" in line for line in other.log.errors), other.log.errors
    finally:
        dead.stop()


def test_result_text_is_never_markup(page, chat):
    """Results are untrusted: a title with HTML stays text, a javascript: URL is no link."""
    from playwright.sync_api import expect

    hostile = {
        "query": "x",
        "locale": "pl-PL",
        "target": "pl",
        "page": 1,
        "results": [
            {
                "title": '<img src=x onerror="window.pwned=1">Tytuł',
                "url": "javascript:window.pwned=1",
                "domain": "",
                "content": "<b>pogrubione</b> <script>window.pwned=1</script>",
                "date": None,
                "language": "pl",
                "engine": "braveweb",
            }
        ],
        "engine_errors": [],
    }
    page.route(
        "**/api/lab/search?*",
        lambda route: route.fulfill(
            status=200, content_type="application/json", body=json.dumps(hostile)
        ),
    )
    open_lab(page, chat.url)
    run_search(page, "x")
    item = page.locator(".lab-result")
    expect(item).to_have_count(1)
    assert item.locator(".lab-title").inner_text() == hostile["results"][0]["title"]
    assert item.locator(".lab-snippet").inner_text() == hostile["results"][0]["content"]
    assert item.locator("a, img, b, script").count() == 0
    assert item.locator(".lab-date").inner_text() == "no date"
    assert page.evaluate("window.pwned") is None


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_lab_fits_a_narrow_screen(browser, chat, dark, tmp_path):
    from playwright.sync_api import expect

    with opened(browser, chat.url, width=400, height=800, dark=dark) as narrow:
        open_lab(narrow, chat.url)
        compare(narrow, QUERY)
        expect(narrow.locator(".lab-bar")).to_have_count(3)
        run(narrow, ".lab-actions button[type=submit]")
        expect(narrow.locator(".lab-result").first).to_be_visible()
        for selector in ("#lab-query", "#lab-locale", "#lab-engines", "#lab-top"):
            box = narrow.locator(selector).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 400, (selector, box)
            label = narrow.locator(f"label[for='{selector[1:]}']")
            expect(label).to_be_visible()
        chart = narrow.locator(".lab-chart svg").bounding_box()
        assert chart and chart["x"] + chart["width"] <= 400
        overflow = narrow.evaluate(
            "() => { const v = document.querySelector('#view-lab');"
            " return [document.documentElement.scrollWidth, v.scrollWidth - v.clientWidth]; }"
        )
        assert overflow[0] <= 400 and overflow[1] <= 0, overflow
        narrow.screenshot(path=str(tmp_path / f"lab-{'dark' if dark else 'light'}.png"))
        assert narrow.log.errors == []


def test_our_engines_old_name_still_means_ours_and_the_same_search(chat, brave):
    """An engine list saved with our engine's old name (a conversation's, a lab link) searches
    ours, and finds the search made under its new name in the cache."""
    first = ok(lab(chat, "search", q=QUERY, locale="en", engines="braveweb"))
    sent = len(brave.requests)
    again = ok(lab(chat, "search", q=QUERY, locale="en", engines="braveapi"))
    assert {r["engine"] for r in again["results"]} == {"braveweb"}
    assert again["results"] == first["results"]
    assert len(brave.requests) == sent  # the same search: no query spent
