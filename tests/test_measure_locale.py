"""measure-locale end to end: real SearXNG, our engine, the fake Brave index, py3langid."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_main


@pytest.mark.parametrize(
    ("query", "locales", "target"),
    [
        ("konfiguracja serwera", "all,pl,pl-PL", "pl"),
        ("configuration du serveur", "all,fr,fr-FR", "fr"),
    ],
)
def test_counts_rise_from_all_to_language_to_full_locale(searxng, brave, query, locales, target):
    run = run_main("measure-locale", query, "--locales", locales, "--json", searxng_url=searxng.url)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["target"] == target  # the last locale's language
    assert report["top"] == 20
    counts = [row["in_target"] for row in report["rows"]]
    assert [row["locale"] for row in report["rows"]] == locales.split(",")
    assert counts[0] < counts[1] < counts[2], counts
    for row in report["rows"]:
        assert row["total"] == 20
        assert len(row["results"]) == 20
        assert row["in_target"] == sum(r["language"] == target for r in row["results"])


def test_top_beyond_one_page_reads_the_next_page(searxng, brave):
    run = run_main(
        "measure-locale",
        "baza danych",
        "--locales",
        "pl-PL",
        "--top",
        "30",
        "--json",
        searxng_url=searxng.url,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["rows"][0]["total"] == 30
    assert {r.params["offset"] for r in brave.requests} == {"0", "1"}


def test_table_names_locale_and_count_out_of_top(searxng, brave):
    run = run_main(
        "measure-locale",
        "baza danych",
        "--locales",
        "all,pl-PL",
        "--top",
        "10",
        searxng_url=searxng.url,
    )
    assert run.returncode == 0, run.stderr
    assert "| locale" in run.stdout
    rows = [line for line in run.stdout.splitlines() if line.startswith("| pl-PL")]
    assert len(rows) == 1 and rows[0].rstrip(" |").endswith("/10")


def test_default_locales_come_from_search_locale(searxng, brave):
    run = run_main(
        "measure-locale",
        "baza danych",
        "--top",
        "5",
        "--json",
        searxng_url=searxng.url,
        SEARCH_LOCALE="pl-PL",
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [row["locale"] for row in report["rows"]] == ["all", "pl", "pl-PL"]


def test_no_language_to_count_is_a_clear_error(searxng):
    run = run_main(
        "measure-locale", "x", "--locales", "pl,all", searxng_url=searxng.url, SEARCH_LOCALE="all"
    )
    assert run.returncode != 0
    assert "give the target language" in run.stderr


def test_the_users_language_is_counted_when_the_locales_name_none(searxng, brave):
    """As the search lab and the MCP server measure: the last locale names no language, so
    SEARCH_LOCALE's is counted."""
    run = run_main(
        "measure-locale",
        "konfiguracja serwera",
        "--locales",
        "pl,all",
        "--top",
        "3",
        "--json",
        searxng_url=searxng.url,
        SEARCH_LOCALE="pl-PL",
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["target"] == "pl"
    assert [row["locale"] for row in report["rows"]] == ["pl", "all"]


def test_an_engine_searxng_lacks_is_refused_by_name(searxng):
    run = run_main(
        "measure-locale", "x", "--locales", "pl", "--engines", "nosuch", searxng_url=searxng.url
    )
    assert run.returncode == 2
    assert "unknown engine(s) nosuch" in run.stderr
