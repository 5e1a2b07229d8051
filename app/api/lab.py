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
    SEARCH_LOCALE; ``all`` alone for ``all``), ``target`` to the last locale's language,
    else SEARCH_LOCALE's.

Failures answer ``{"detail": "..."}``: 400 for an empty query, an invalid locale, page or
top; 502 when SearXNG is unreachable or an engine failed (the message says which and why).
Language detection is CPU work and runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, HTTPException, Query, Request

from app import config
from app.api.bodies import ErrorBody
from app.search import language
from app.search.client import QueryRefused, SearchError, Searxng

router = APIRouter(
    prefix="/api/lab",
    responses={
        404: {"model": ErrorBody, "description": "an engine or locale this SearXNG lacks"},
        502: {"model": ErrorBody, "description": "SearXNG or an engine failed"},
    },
)

MAX_QUERY_CHARS = 400
MAX_PAGE = 10
MAX_TOP = 50
MAX_LOCALES = 8
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")
# What the parameters accept, told to /openapi.json (so a fuzzer sends what is valid); the
# handlers check them by hand, with messages that name the mistake.
LOCALE_PATTERN = r"^(all|auto|[a-z]{2,3}(-[A-Za-z]{2,4})?)?$"
LANGUAGE_LOCALE = r"[a-z]{2,3}(-[A-Za-z]{2,4})?"
LOCALES_PATTERN = rf"^((all|auto|{LANGUAGE_LOCALE}),){{0,7}}{LANGUAGE_LOCALE}$|^$"
ENGINES_PATTERN = r"^[a-z0-9_,]*$"
BLANKS = " \t\r\n\f\v"
QUERY_PATTERN = r"[^ \t\r\n\f\v]"
QueryText = Annotated[
    str, Query(json_schema_extra={"pattern": QUERY_PATTERN, "maxLength": MAX_QUERY_CHARS})
]
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
    # Blank means these few characters: Python's idea of whitespace is wider than JSON
    # Schema's, and the two must agree on what /openapi.json calls valid.
    query = q.strip(BLANKS)
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


async def check_engines(request: Request, engines: str) -> str | None:
    """The engines asked for, each one this SearXNG has loaded (it would answer an unknown
    name with an empty page); None for SearXNG's own choice."""
    names = [name for name in engines.replace(" ", "").split(",") if name]
    if not names:
        return None
    try:
        listed = (await searxng(request).get_json("/config")).get("engines", [])
    except SearchError as exc:
        raise upstream_failure(exc) from None
    loaded = {e.get("name") for e in listed if e.get("enabled", True)}
    unknown = [name for name in names if name not in loaded]
    if unknown:  # 404, like a model that does not exist
        raise HTTPException(
            404,
            f"unknown engine(s) {', '.join(unknown)}: this SearXNG runs "
            f"{', '.join(sorted(n for n in loaded if n)) or 'no engine'}",
        )
    return ",".join(names)


def upstream_failure(exc: SearchError) -> HTTPException:
    """404 when SearXNG does not know what was asked for (a locale it lacks: it has no such
    thing, like an unknown engine), 502 when it or an engine failed."""
    return HTTPException(status_code=404 if isinstance(exc, QueryRefused) else 502, detail=str(exc))


@router.get("/search")
async def search(
    request: Request,
    q: QueryText,
    locale: Annotated[str, Query(json_schema_extra={"pattern": LOCALE_PATTERN})] = "",
    engines: Annotated[str, Query(json_schema_extra={"pattern": ENGINES_PATTERN})] = "",
    page: Annotated[str, Query(json_schema_extra={"pattern": r"^([1-9]|10)$"})] = "1",
) -> LabSearch:
    query = check_query(q)
    chosen = config.check_locale(locale.strip() or default_locale(request))
    number = check_number("page", page, 1, MAX_PAGE)
    if not query.strip():  # only Unicode spaces: nothing to search, and nothing wrong
        return LabSearch(query, chosen, target_of(chosen), number, results=[])
    try:
        chosen_engines = await check_engines(request, engines)
        return await lab_search(searxng(request), query, chosen, chosen_engines, number)
    except SearchError as exc:
        raise upstream_failure(exc) from None


@router.get("/measure")
async def measure_locales(
    request: Request,
    q: QueryText,
    locales: Annotated[str, Query(json_schema_extra={"pattern": LOCALES_PATTERN})] = "",
    locale: Annotated[str, Query(json_schema_extra={"pattern": f"^({LANGUAGE_LOCALE})?$"})] = "",
    target: Annotated[str, Query(json_schema_extra={"pattern": r"^([a-z]{2,3})?$"})] = "",
    top: Annotated[str, Query(json_schema_extra={"pattern": r"^([1-9]|[1-4][0-9]|50)$"})] = "20",
    engines: Annotated[str, Query(json_schema_extra={"pattern": ENGINES_PATTERN})] = "",
) -> Measurement:
    query = check_query(q)
    count = check_number("top", top, 1, MAX_TOP)
    home = default_locale(request)
    # Checked even when `locales` overrides it: a wrong value is refused, never ignored.
    base = config.check_locale(locale.strip() or home)
    if locales.strip():
        chosen = check_locales(locales)
    else:
        chosen = language.default_locales(base) or [base]
    # The language to count: asked for, else the last locale's, else the user's own.
    wanted = target.strip().lower() or target_of(chosen[-1]) or target_of(home)
    if not wanted:
        raise bad_request(
            f"neither {chosen[-1]} nor SEARCH_LOCALE ({home}) names a language: "
            "give the target language (e.g. pl)"
        )
    if not LANGUAGE.match(wanted):
        raise bad_request(f"target must be a language code such as 'pl', not {wanted!r}")
    if not query.strip():  # only Unicode spaces: nothing to search, and nothing wrong
        empty = [language.LocaleRow(locale=locale, in_target=0, total=0) for locale in chosen]
        return Measurement(query=query, target=wanted, top=count, locales=chosen, rows=empty)
    try:
        rows = await language.measure(
            searxng(request), query, chosen, wanted, count, await check_engines(request, engines)
        )
    except SearchError as exc:
        raise upstream_failure(exc) from None
    return Measurement(query=query, target=wanted, top=count, locales=chosen, rows=rows)
