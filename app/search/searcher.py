"""The one way the service searches: every conversation's web_search, the lab, the
commands (and whatever else searches) go through one Searcher, which serves a search made
lately from the cache, paces the others to the search plan's rate (the Governor), and
tries a rate-limited search once more after a short wait (docs/search-spend.md).

    searcher = Searcher(Searxng(url), Governor(rate, store=storage), cache=storage, ttl=3600)
    response = await searcher.search("rust async", locale="pl-PL")
    response.waited, response.cached_age   # for the trail: "from cache, 12 min old"
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Protocol

from app import config
from app.search import cache as keys
from app.search.cache import CacheStore, SearchKey, own_rows
from app.search.client import SearchError, SearchResponse, Searxng
from app.search.governor import Governor, PaceStore
from app.search.plan import PlanReader
from app.search.shares import ShareGate, ShareUsedUp

logger = logging.getLogger(__name__)

DEFAULT_RATE = 1.0
"""Searches a second when nobody says otherwise: Brave's free plan."""
RETRY_SECONDS = 3.0
"""How long a search refused for the rate (HTTP 429) waits before its one retry: SearXNG
suspends the engine for Brave's X-RateLimit-Reset, one or two seconds for the per-second
window."""
RETRY_MARGIN_SECONDS = 0.5
"""Added to Brave's reset before the retry: SearXNG's suspension of the engine, which
lasts the reset from the moment SearXNG saw the 429, must be over."""
MAX_RETRY_SECONDS = 10.0
"""A 429 whose window resets later than this is not waited for: the search fails, named."""
RATE_LIMITED = "too many requests"
QUOTA_USED_UP = "QUOTA_LIMITED"
"""Brave's code when the month's queries are spent: no retry can help."""


class RateLimited(SearchError):
    """The search engine refused the search for its rate or quota, even after a retry."""

    status = 503


class SharedStore(PaceStore, CacheStore, Protocol):
    """The database every replica shares: the search's turn and the cache."""


class Searcher:
    """Searches through SearXNG, paced, cached, retried once when rate-limited."""

    def __init__(
        self,
        client: Searxng,
        governor: Governor | None = None,
        cache: CacheStore | None = None,
        *,
        ttl: Callable[[], float] | float = 0.0,
        entries: int = 1000,
        retry_seconds: Callable[[], float | None] | float = RETRY_SECONDS,
        shared: bool = False,
        shares: ShareGate | None = None,
    ) -> None:
        self.client = client
        self.governor = governor or Governor(lambda: DEFAULT_RATE)
        self.cache = cache
        self.ttl = ttl if callable(ttl) else (lambda: float(ttl))
        """SEARCH_CACHE_TTL, read at each search; 0 turns the cache off."""
        self.entries = entries
        self.shared = shared
        """SEARCH_CACHE_SHARED: one cache for the household's people, a cached search's age
        told only to the person who ran it; else each person's own cache."""
        self.retry_seconds = retry_seconds if callable(retry_seconds) else lambda: retry_seconds
        """Seconds until the window of Brave's 429 resets (the plan file's record of its
        X-RateLimit-Reset); None: unknown, and the retry waits RETRY_SECONDS."""
        self.shares = shares
        """Household mode: each person's share of the plan, spent before a search is sent;
        None: no shares (a command, the single-user modes ask as no one)."""
        self.flying: dict[str, asyncio.Future[SearchResponse]] = {}
        """The searches on their way to SearXNG, by key."""

    @classmethod
    def of_plan(
        cls,
        client: Searxng,
        plan: PlanReader,
        store: SharedStore | None = None,
        *,
        ttl: Callable[[], float] | float = 0.0,
        entries: int = 1000,
        shared: bool = False,
        shares: ShareGate | None = None,
    ) -> Searcher:
        """The one way the service and the commands build their searcher: paced to the
        Brave plan's rate (or SEARCH_RATE), retried once after the reset Brave's 429 names;
        with a `store` (the service's database), the pace shared with every replica and the
        results cached there; without one (a command), local to the process, uncached."""
        governor = Governor(plan.plan_rate, store=store)
        retry = plan.retry_seconds
        return cls(
            client,
            governor,
            store,
            ttl=ttl,
            entries=entries,
            retry_seconds=retry,
            shared=shared,
            shares=shares,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> Searcher:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def loaded_engines(self) -> set[str]:
        return await self.client.loaded_engines()

    async def queries_per_search(self) -> int:
        """The Brave queries a search with SearXNG's default engines sends (two with both
        of ours on); one when SearXNG does not say (its search will say why)."""
        try:
            return await self.client.queries(None)
        except SearchError as exc:
            logger.warning("SearXNG's default engines unknown, one query a search: %s", exc)
            return 1

    async def expected_wait(self) -> float:
        """About how long a search through SearXNG asking now would wait for the plan's
        rate (the Governor's estimate, the other replicas' searches counted; a search the
        cache serves waits for nothing)."""
        return await self.governor.shared_wait()

    async def search(
        self,
        query: str,
        *,
        locale: str | None = None,
        engines: str | None = None,
        page: int = 1,
        time_range: str | None = None,
        fresh: bool = False,
        person: int | None = None,
    ) -> SearchResponse:
        """One page of results; from the cache when the same search was made within the
        TTL (unless ``fresh``), else through SearXNG once the plan's rate allows it.
        RateLimited when the engine refused it for its rate twice, or for its quota.
        ``person``: who asks in household mode (their own cache, unless shared)."""
        engines = config.engine_list(engines)
        mine = None if self.shared else person
        key = SearchKey(query, locale, engines, page, time_range, mine).text()
        ttl = self.ttl() if self.cache is not None else 0.0
        if ttl <= 0 or fresh:
            keep = ttl > 0
            return await self.asked(
                key, query, locale, engines, page, time_range, keep=keep, by=person
            )
        if (kept := await self.cached(key, ttl, person)) is not None:
            return kept
        # The same search already on its way (a lab comparison, two conversations at once)
        # is awaited, not asked again; in a task of its own, so that the Stop of the one
        # who asked first leaves the others their answer.
        flying = self.flying.get(key)
        if flying is None:
            asking = self.asked(key, query, locale, engines, page, time_range, keep=True, by=person)
            flying = self.flying[key] = asyncio.ensure_future(asking)
            flying.add_done_callback(lambda done: self.landed(key, done))
        try:
            return await asyncio.shield(flying)
        except ShareUsedUp as exc:
            if exc.person == person:
                raise
            # The same search of someone else's (a shared cache) was refused for their
            # share, which says nothing of this person's: asked as theirs.
            return await self.asked(
                key, query, locale, engines, page, time_range, keep=True, by=person
            )

    def landed(self, key: str, done: asyncio.Future[SearchResponse]) -> None:
        if self.flying.get(key) is done:
            del self.flying[key]
        if not done.cancelled():
            done.exception()  # retrieved: nobody may be left to await it

    async def asked(
        self,
        key: str,
        query: str,
        locale: str | None,
        engines: str | None,
        page: int,
        time_range: str | None,
        *,
        keep: bool,
        by: int | None,
    ) -> SearchResponse:
        """Through SearXNG, in the search's turn; a rate-limited search once more after
        the delay; kept in the cache when ``keep`` and the answer is whole, as ``by``'s."""
        waited, response = await self.paced(query, locale, engines, page, time_range, by)
        delay = self.retry_delay(response)
        if delay is not None:
            logger.info("search rate-limited; retrying once in %.1f s", delay)
            await asyncio.sleep(delay)
            again, response = await self.paced(query, locale, engines, page, time_range, by)
            waited += delay + again
        if rate_limited(response):
            raise RateLimited(refusal(response))
        if keep and self.cache is not None and keys.cacheable(response):
            await self.cache.keep_search(key, keys.encode(response, by), self.entries)
        return dataclasses.replace(response, waited=round(waited, 3))

    def retry_delay(self, response: SearchResponse) -> float | None:
        """How long to wait before the one retry of a search refused for the rate; None:
        no retry (nothing refused, the month's quota spent, or a reset too far off)."""
        if not rate_limited(response) or quota_used_up(response):
            return None
        reset = self.retry_seconds()
        delay = RETRY_SECONDS if reset is None else reset + RETRY_MARGIN_SECONDS
        return delay if delay <= MAX_RETRY_SECONDS else None

    async def paced(
        self,
        query: str,
        locale: str | None,
        engines: str | None,
        page: int,
        time_range: str | None,
        person: int | None,
    ) -> tuple[float, SearchResponse]:
        """Through SearXNG in its turn, one for each Brave query it sends: the seconds it
        waited, and the answer. The queries are spent from `person`'s share just before it
        is sent (ShareUsedUp: nothing sent), so a search stopped while it waits costs none."""
        queries = await self.client.queries(engines)
        async with self.governor.slot(queries) as waited:
            if self.shares is not None and person is not None and queries > 0:
                await self.shares.spend(person, queries)
            response = await self.client.search(
                query, locale=locale, engines=engines, page=page, time_range=time_range
            )
        return waited, response

    async def cached(self, key: str, ttl: float, person: int | None) -> SearchResponse | None:
        """The cached search, its age told only to the person who ran it: to another (a
        shared cache in household mode) it is a search, which says nothing of when anyone
        else searched the same words."""
        assert self.cache is not None
        found = await self.cache.cached_search(key)
        if found is None:
            return None
        text, stored_at = found
        age = max(0.0, time.time() - stored_at)
        kept = keys.decode(text) if age < ttl else None
        if kept is None:
            return None
        told = round(age, 1) if kept.by == person else None
        return SearchResponse(kept.results, [], cached_age=told)

    async def clear(self, person: int | None) -> int:
        """Empty the cache (Settings), or in household mode only `person`'s searches; how
        many went."""
        if self.cache is None:
            return 0
        return await self.cache.clear_search_cache(None if person is None else own_rows(person))


def rate_limited(response: SearchResponse) -> bool:
    """Nothing came, because an engine was refused for its rate (or is suspended for it)."""
    return not response.results and any(RATE_LIMITED in e for e in response.engine_errors)


def quota_used_up(response: SearchResponse) -> bool:
    return any(QUOTA_USED_UP in e for e in response.engine_errors)


def refusal(response: SearchResponse) -> str:
    """What happened, and until when where the engines' failures say it."""
    told = response.unavailable or "; ".join(response.engine_errors)
    if response.unavailable and quota_used_up(response):
        return told  # it names the month's end
    if quota_used_up(response):
        return f"the search plan's monthly quota is used up ({told})"
    return f"the search plan's rate was exceeded, and again when retried: {told}"
