"""The search lab's API: a search as the model gets it, and the locale measurement.

``GET /api/lab/search?q=&locale=&engines=&page=1``
    One page of results through our SearXNG, as ``web_search`` hands them to the model,
    with each result's detected language::

        {"query": str, "locale": str, "target": str | null, "page": int,
         "results": [{"title", "url", "domain", "content", "date": "YYYY-MM-DD" | null,
                      "language": "pl", "engine"}],
         "engine_errors": [str]}

    ``locale`` defaults to SEARCH_LOCALE; ``target`` is its language (null for ``all``),
    the one the page highlights. ``engine_errors`` lists engines that failed while others
    answered; when no result came and an engine failed, the answer is 502 instead.

``GET /api/lab/measure?q=&locales=all,pl,pl-PL&target=&top=20&engines=&locale=``
    What ``python -m app measure-locale`` measures: for each locale, how many of the top
    results are in the target language::

        {"query": str, "target": str, "top": int, "locales": [str],
         "rows": [{"locale", "in_target", "total", "results": [{"url", "language"}]}]}

    ``locales`` defaults to ``all,<language>,<locale>`` of ``locale`` (itself defaulting to
    SEARCH_LOCALE), ``target`` to the last locale's language.

Failures answer ``{"detail": "..."}``: 400 for an empty query, an invalid locale, page or
top; 502 when SearXNG is unreachable or an engine failed (the message says which and why).
Language detection is CPU work and runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from fastapi import APIRouter, HTTPException, Request

from app import config, language
from app.search import SearchError, Searxng

router = APIRouter(prefix="/api/lab")

MAX_QUERY_CHARS = 400
MAX_PAGE = 10
MAX_TOP = 50
MAX_LOCALES = 8
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")
LANGUAGE = re.compile(r"^[a-z]{2,3}$")


@dataclass(frozen=True)
class LabResult:
    title: str
    url: str
    domain: str
    content: str
    date: str | None
    """YYYY-MM-DD from SearXNG's publishedDate, or None when the result is undated."""
    language: str
    """ISO 639-1 code detected on title + content, as measure-locale does."""
    engine: str


@dataclass(frozen=True)
class LabSearch:
    query: str
    locale: str
    target: str | None
    page: int
    results: list[LabResult]
    engine_errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Measurement:
    query: str
    target: str
    top: int
    locales: list[str]
    rows: list[language.LocaleRow]


def bad_request(message: str) -> HTTPException:
    return HTTPException(status_code=400, detail=message)


def searxng(request: Request) -> Searxng:
    return request.app.state.services.searxng


def default_locale(request: Request) -> str:
    return request.app.state.services.settings.search_locale


def check_query(q: str) -> str:
    query = q.strip()
    if not query:
        raise bad_request("the query is empty: type what to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise bad_request(f"the query is longer than {MAX_QUERY_CHARS} characters")
    return query


def check_number(name: str, value: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise bad_request(f"{name} must be a whole number from {low} to {high}, not {value!r}")
    return number


def check_locales(value: str) -> list[str]:
    """The comma list as SearXNG spells each locale, without repeats (ConfigError if bad)."""
    given = [item.strip() for item in value.split(",") if item.strip()]
    locales = list(dict.fromkeys(config.check_locale(item) for item in given))
    if not locales:
        raise bad_request("give at least one locale, e.g. all,pl,pl-PL")
    if len(locales) > MAX_LOCALES:
        raise bad_request(f"compare at most {MAX_LOCALES} locales at once")
    return locales


def target_of(locale: str) -> str | None:
    """The language a locale asks for; None for ``all`` and ``auto``."""
    return None if locale in ("all", "auto") else language.language_of(locale)


def day_of(published: str | None) -> str | None:
    match = DAY.match(published or "")
    return match.group(0) if match else None


async def lab_search(
    client: Searxng, query: str, locale: str, engines: str | None, page: int
) -> LabSearch:
    """One page of results with their languages; SearchError when nothing came back
    because SearXNG or every engine failed (the model would get "search failed")."""
    response = await client.search(query, locale=locale, engines=engines, page=page)
    if not response.results and response.engine_errors:
        raise SearchError("; ".join(response.engine_errors))
    languages = await asyncio.to_thread(language.detect_results, response.results)
    results = [
        LabResult(
            title=r.title,
            url=r.url,
            domain=urlsplit(r.url).hostname or "",
            content=r.content,
            date=day_of(r.publishedDate),
            language=lang,
            engine=r.engine,
        )
        for r, lang in zip(response.results, languages, strict=True)
    ]
    return LabSearch(
        query=query,
        locale=locale,
        target=target_of(locale),
        page=page,
        results=results,
        engine_errors=response.engine_errors,
    )


def upstream_failure(exc: SearchError) -> HTTPException:
    return HTTPException(status_code=502, detail=str(exc))


@router.get("/search")
async def search(
    request: Request,
    q: str = "",
    locale: str = "",
    engines: str = "",
    page: str = "1",
) -> LabSearch:
    query = check_query(q)
    chosen = config.check_locale(locale.strip() or default_locale(request))
    number = check_number("page", page, 1, MAX_PAGE)
    try:
        return await lab_search(searxng(request), query, chosen, engines.strip() or None, number)
    except SearchError as exc:
        raise upstream_failure(exc) from None


@router.get("/measure")
async def measure_locales(
    request: Request,
    q: str = "",
    locales: str = "",
    locale: str = "",
    target: str = "",
    top: str = "20",
    engines: str = "",
) -> Measurement:
    query = check_query(q)
    count = check_number("top", top, 1, MAX_TOP)
    if locales.strip():
        chosen = check_locales(locales)
    else:
        base = config.check_locale(locale.strip() or default_locale(request))
        chosen = language.default_locales(base)
        if not chosen:
            raise bad_request(
                f"the locale {base!r} names no language: give the locales to compare "
                "(e.g. all,pl,pl-PL)"
            )
    wanted = target.strip().lower() or target_of(chosen[-1])
    if not wanted:
        raise bad_request(
            f"the last locale ({chosen[-1]}) names no language: give the target language (e.g. pl)"
        )
    if not LANGUAGE.match(wanted):
        raise bad_request(f"target must be a language code such as 'pl', not {wanted!r}")
    try:
        rows = await language.measure(
            searxng(request), query, chosen, wanted, count, engines.strip() or None
        )
    except SearchError as exc:
        raise upstream_failure(exc) from None
    return Measurement(query=query, target=wanted, top=count, locales=chosen, rows=rows)
