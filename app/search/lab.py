"""The search lab: a search as the model gets it, each result with its language, and the
locale measurement of ``python -m app measure-locale`` (the page's Lab; app/api/lab.py
serves it).

The lab's inputs come from a query string: each is checked here, with a message that names
the mistake (LabRefused, 400). A SearXNG failure is a SearchError (502), an engine this
SearXNG lacks an UnknownEngine (404, like a model that does not exist).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field

from app import config
from app.errors import ServiceError
from app.search import language
from app.search.client import SearchError
from app.search.searcher import Searcher

MAX_QUERY_CHARS = 400
MAX_PAGE = 10
MAX_TOP = 50
MAX_LOCALES = 8
# Blank means these few characters: Python's idea of whitespace is wider than JSON Schema's,
# and the two must agree on what /openapi.json calls valid (app/api/lab.py's patterns).
BLANKS = " \t\r\n\f\v"
LANGUAGE = re.compile(r"^[a-z]{2,3}$")


class LabRefused(ServiceError):
    """A lab parameter that cannot be used: an empty query, a page or count out of range."""

    status = 400


class UnknownEngine(ServiceError):
    """An engine this SearXNG has not loaded (it would answer the name with an empty page)."""

    status = 404


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
    cached_age: float | None = None
    """Seconds since it was stored, when it came from the search cache."""
    waited: float = 0.0
    """Seconds it waited for the search plan's rate."""
    cost: float | None = None
    """Dollars its Brave queries cost at BRAVE_PRICE_PER_1000 (two with both of our
    engines): 0 when none was spent (the cache answered, or engines without ours); None
    when no price is set."""


@dataclass(frozen=True)
class Measurement:
    query: str
    target: str
    top: int
    locales: list[str]
    rows: list[language.LocaleRow]


def check_query(q: str) -> str:
    query = q.strip(BLANKS)
    if not query:
        raise LabRefused("the query is empty: type what to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise LabRefused(f"the query is longer than {MAX_QUERY_CHARS} characters")
    return query


def check_number(name: str, value: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise LabRefused(f"{name} must be a whole number from {low} to {high}, not {value!r}")
    return number


def check_locales(value: str) -> list[str]:
    """The comma list as SearXNG spells each locale, without repeats (ConfigError if bad)."""
    given = [item.strip() for item in value.split(",") if item.strip()]
    locales = list(dict.fromkeys(config.check_locale(item) for item in given))
    if not locales:
        raise LabRefused("give at least one locale, e.g. all,pl,pl-PL")
    if len(locales) > MAX_LOCALES:
        raise LabRefused(f"compare at most {MAX_LOCALES} locales at once")
    return locales


def target_of(locale: str) -> str | None:
    """The language a locale asks for; None for ``all`` and ``auto``."""
    return None if locale in ("all", "auto") else language.language_of(locale)


async def check_engines(client: Searcher, engines: str) -> str | None:
    """The engines asked for, each one this SearXNG has loaded; None for SearXNG's own
    choice."""
    names = (config.engine_list(engines) or "").split(",")
    if not any(names):
        return None
    loaded = await client.loaded_engines()
    unknown = [name for name in names if name not in loaded]
    if unknown:
        raise UnknownEngine(
            f"unknown engine(s) {', '.join(unknown)}: this SearXNG runs "
            f"{', '.join(sorted(loaded)) or 'no engine'}"
        )
    return ",".join(names)


async def lab_search(
    client: Searcher,
    query: str,
    locale: str,
    engines: str | None,
    page: int,
    *,
    fresh: bool = False,
    price: float = 0.0,
    person: int | None = None,
) -> LabSearch:
    """One page of results with their languages; SearchError when nothing came back
    because SearXNG or every engine failed (the model would get "search failed").
    ``fresh`` asks SearXNG even when the cache holds the search; ``price`` is dollars per
    1,000 Brave queries (0: no cost said); ``person``: who asks in household mode."""
    response = await client.search(
        query, locale=locale, engines=engines, page=page, fresh=fresh, person=person
    )
    if response.unavailable:  # every engine failed: what happened, until when
        raise SearchError("; ".join(failure.told for failure in response.failures))
    languages = await asyncio.to_thread(language.detect_results, response.results)
    results = [
        LabResult(
            title=r.title,
            url=r.url,
            domain=r.domain,
            content=r.content,
            date=r.day,
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
        cached_age=response.cached_age,
        waited=response.waited,
        cost=query_cost(response.queries, price),
    )


def query_cost(queries: int, price: float) -> float | None:
    """What one search cost: its Brave queries (SearchResponse.queries) at ``price`` per
    1,000."""
    if not price:
        return None
    return queries * price / 1000


async def search_page(
    client: Searcher,
    q: str,
    locale: str,
    engines: str,
    page: str,
    home: str,
    *,
    fresh: bool = False,
    price: float = 0.0,
    person: int | None = None,
) -> LabSearch:
    """GET /api/lab/search: the parameters as given, ``home`` being SEARCH_LOCALE, ``price``
    BRAVE_PRICE_PER_1000, ``person`` who asks in household mode."""
    query = check_query(q)
    chosen = config.check_locale(locale.strip() or home)
    number = check_number("page", page, 1, MAX_PAGE)
    if not query.strip():  # only Unicode spaces: nothing to search, and nothing wrong
        return LabSearch(query, chosen, target_of(chosen), number, results=[])
    names = await check_engines(client, engines)
    return await lab_search(
        client, query, chosen, names, number, fresh=fresh, price=price, person=person
    )


async def measurement(
    client: Searcher,
    q: str,
    *,
    locales: str,
    locale: str,
    target: str,
    top: str,
    engines: str,
    home: str,
    fresh: bool = False,
    person: int | None = None,
) -> Measurement:
    """GET /api/lab/measure: for each locale, how many of the top results are in the
    target language, the parameters as given.

    ``locales`` defaults to ``all,<language>,<locale>`` of ``locale`` (itself defaulting to
    ``home``, SEARCH_LOCALE), ``target`` to the last locale's language, else home's;
    ``person``: who asks in household mode (their own search cache)."""
    query = check_query(q)
    count = check_number("top", top, 1, MAX_TOP)
    # Checked even when `locales` overrides it: a wrong value is refused, never ignored.
    base = config.check_locale(locale.strip() or home)
    if locales.strip():
        chosen = check_locales(locales)
    else:
        chosen = language.default_locales(base) or [base]
    wanted = target.strip().lower() or target_of(chosen[-1]) or target_of(home)
    if not wanted:
        raise LabRefused(
            f"neither {chosen[-1]} nor SEARCH_LOCALE ({home}) names a language: "
            "give the target language (e.g. pl)"
        )
    if not LANGUAGE.match(wanted):
        raise LabRefused(f"target must be a language code such as 'pl', not {wanted!r}")
    if not query.strip():  # only Unicode spaces: nothing to search, and nothing wrong
        rows = [language.LocaleRow(locale=each, in_target=0, total=0) for each in chosen]
    else:
        names = await check_engines(client, engines)
        rows = await language.measure(
            client, query, chosen, wanted, count, names, fresh=fresh, person=person
        )
    return Measurement(query=query, target=wanted, top=count, locales=chosen, rows=rows)
