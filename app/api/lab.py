"""The search lab's API: a search as the model gets it, and the locale measurement.

``GET /api/lab/search?q=&locale=&engines=&page=1&fresh=false``
    One page of results through our SearXNG, as ``web_search`` hands them to the model,
    with each result's detected language::

        {"query": str, "locale": str, "target": str | null, "page": int,
         "results": [{"title", "url", "domain", "content", "date": "YYYY-MM-DD" | null,
                      "language": "pl", "engine"}],
         "engine_errors": [str], "cached_age": float | null, "waited": float,
         "cost": float | null}

    ``locale`` defaults to SEARCH_LOCALE; ``target`` is its language (null for ``all``),
    the one the page highlights. ``cached_age`` is the seconds since the search was
    stored when it came from the search cache (``fresh=true`` asks SearXNG instead);
    ``waited`` the seconds it queued for the search plan's rate; ``cost`` the dollars its
    Brave query cost at ``BRAVE_PRICE_PER_1000`` (0 when the cache answered or no Brave
    query was sent; null when the price is 0). ``engine_errors`` lists
    engines that failed while others answered; when no result came and an engine failed,
    the answer is 502 instead.

``GET /api/lab/measure?q=&locales=all,pl,pl-PL&target=&top=20&engines=&locale=&fresh=false``
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

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from app.api.access import state_person
from app.api.bodies import REFUSALS, DetailBody
from app.search import lab
from app.search.lab import LabSearch, Measurement
from app.search.searcher import Searcher

router = APIRouter(
    prefix="/api/lab",
    responses={
        **REFUSALS,
        404: {"model": DetailBody, "description": "an engine or locale this SearXNG lacks"},
        502: {"model": DetailBody, "description": "SearXNG or an engine failed"},
    },
)

# What the parameters accept, told to /openapi.json (so a fuzzer sends what is valid);
# app.search.lab checks them by hand, with messages that name the mistake.
LOCALE_PATTERN = r"^(all|auto|[a-z]{2,3}(-[A-Za-z]{2,4})?)?$"
LANGUAGE_LOCALE = r"[a-z]{2,3}(-[A-Za-z]{2,4})?"
LOCALES_PATTERN = rf"^((all|auto|{LANGUAGE_LOCALE}),){{0,7}}{LANGUAGE_LOCALE}$|^$"
ENGINES_PATTERN = r"^[a-z0-9_,]*$"
QUERY_PATTERN = r"[^ \t\r\n\f\v]"
QueryText = Annotated[
    str, Query(json_schema_extra={"pattern": QUERY_PATTERN, "maxLength": lab.MAX_QUERY_CHARS})
]
Engines = Annotated[str, Query(json_schema_extra={"pattern": ENGINES_PATTERN})]


def searcher(request: Request) -> Searcher:
    """The service's one searcher: the lab's searches are paced and cached like a turn's."""
    client: Searcher = request.app.state.services.searcher
    return client


async def asker(request: Request) -> int | None:
    """Who asks in household mode (their own search cache); None with the access token
    alone, and in the single-user modes."""
    person = state_person(request.scope)
    return person.id if person else None


def default_locale(request: Request) -> str:
    """SEARCH_LOCALE: what the lab searches in when no locale is given."""
    locale: str = request.app.state.services.settings.search_locale
    return locale


def price(request: Request) -> float:
    """BRAVE_PRICE_PER_1000: what a search the lab sends to Brave costs."""
    dollars: float = request.app.state.services.settings.brave_price_per_1000
    return dollars


Client = Annotated[Searcher, Depends(searcher)]
Fresh = Annotated[bool, Query(description="search again even if the cache holds it")]
HomeLocale = Annotated[str, Depends(default_locale)]
Price = Annotated[float, Depends(price)]
Asker = Annotated[int | None, Depends(asker)]


@router.get("/search")
async def search(
    client: Client,
    home: HomeLocale,
    dollars: Price,
    person: Asker,
    q: QueryText,
    locale: Annotated[str, Query(json_schema_extra={"pattern": LOCALE_PATTERN})] = "",
    engines: Engines = "",
    page: Annotated[str, Query(json_schema_extra={"pattern": r"^([1-9]|10)$"})] = "1",
    fresh: Fresh = False,
) -> LabSearch:
    return await lab.search_page(
        client, q, locale, engines, page, home, fresh=fresh, price=dollars, person=person
    )


@router.get("/measure")
async def measure_locales(
    client: Client,
    home: HomeLocale,
    person: Asker,
    q: QueryText,
    locales: Annotated[str, Query(json_schema_extra={"pattern": LOCALES_PATTERN})] = "",
    locale: Annotated[str, Query(json_schema_extra={"pattern": f"^({LANGUAGE_LOCALE})?$"})] = "",
    target: Annotated[str, Query(json_schema_extra={"pattern": r"^([a-z]{2,3})?$"})] = "",
    top: Annotated[str, Query(json_schema_extra={"pattern": r"^([1-9]|[1-4][0-9]|50)$"})] = "20",
    engines: Engines = "",
    fresh: Fresh = False,
) -> Measurement:
    return await lab.measurement(
        client,
        q,
        locales=locales,
        locale=locale,
        target=target,
        top=top,
        engines=engines,
        home=home,
        fresh=fresh,
        person=person,
    )
