"""Searching through SearXNG's JSON API, with its failures turned into clear errors."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import httpx

from app import config, jsoncodec
from app.errors import ServiceError
from app.search.failures import EngineFailure, Suspensions
from app.search.plan import PlanReader
from app.webtext import PASSAGE_MARK

SearxngObject: TypeAlias = dict[str, Any]
"""A JSON object SearXNG answered (/search, /config, /stats/errors), read key by key and
defensively: its shape is SearXNG's, and a wrong one is a SearchError. Free-form JSON
until read."""

# SearXNG reports a failed engine by the class of its exception; this is the class
# behind each message, to find the engine's own words in /stats/errors.
ERROR_CLASSES = {
    "too many requests": "searx.exceptions.SearxEngineTooManyRequestsException",
    "server API error": "searx.exceptions.SearxEngineAPIException",
    "access denied": "searx.exceptions.SearxEngineAccessDeniedException",
    "CAPTCHA": "searx.exceptions.SearxEngineCaptchaException",
}
MAX_DETAILS = 3  # an engine's distinct error messages quoted per failure
DETAILS_SETTLE_SECONDS = 0.3  # a detail not yet in /stats/errors is read again after this
BRAVE_ENGINES = frozenset({config.ENGINE_NAME, config.CONTEXT_ENGINE_NAME})
"""Our engines: each one a search asks spends a query of the Brave plan."""
DEFAULT_CATEGORY = "general"
"""The category SearXNG searches when a search names no engine: its defaults are the
enabled engines in it."""
DEFAULTS_SECONDS = 300.0
"""How long the defaults read from /config are trusted: a SearXNG restarted with other
settings while the service runs is counted right again within this (at once when the
service met it down)."""
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")
# How our engine (searxng-engines/brave_api.py) writes a result's content: the date, then
# the description and extra snippets joined (tests/test_mcp.py checks they agree).
DATE_SEPARATOR = " — "
SNIPPET_SEPARATOR = " … "
# How our LLM Context engine (searxng-engines/brave_llm.py) joins a page's passages.
CHUNK_SEPARATOR = " ¶ "
DATED = re.compile(r"^\d{4}-\d{2}-\d{2}" + re.escape(DATE_SEPARATOR))


class SearchError(ServiceError):
    """The search could not be run: SearXNG unreachable or refusing, or an engine failed."""

    status = 502


class QueryRefused(SearchError):
    """SearXNG found the query itself invalid (HTTP 400), e.g. a locale it does not know:
    it has no such thing, like an unknown engine (404)."""

    status = 404


@dataclass(frozen=True)
class Result:
    title: str
    url: str
    content: str
    publishedDate: str | None  # noqa: N815 -- SearXNG's own field name, kept for --json
    engine: str

    def as_dict(self) -> dict[str, str | None]:
        return asdict(self)

    def for_model(self, number: int) -> str:
        """The result as a model reads it: its number, title, address, then its text (the
        engine puts the publication date first, then the joined snippets); a page Brave
        read, its passages one a line, each after PASSAGE_MARK (a page's text holds no
        line break: SearXNG folds them)."""
        if not self.read_through_brave:
            return f"[{number}] {self.title}\n{self.url}\n{self.content}"
        dated = f"{self.day}{DATE_SEPARATOR}" if self.day else ""
        head = f"[{number}] {self.title}\n{self.url}\n{dated}the page, read by Brave: its passages"
        return head + "".join(PASSAGE_MARK + passage for passage in self.passages)

    @property
    def read_through_brave(self) -> bool:
        """Its page came read, as passages, through Brave's LLM Context (our bravellm
        engine): no request of ours reached the page's server."""
        return self.engine == config.CONTEXT_ENGINE_NAME

    @property
    def passages(self) -> list[str]:
        """A page read through Brave: its passages, without the date in front."""
        text = DATED.sub("", self.content, count=1)
        return [part.strip() for part in text.split(CHUNK_SEPARATOR.strip()) if part.strip()]

    @property
    def domain(self) -> str:
        """The host the result is on, as the page's chips and the lab show it."""
        return urlsplit(self.url).hostname or ""

    @property
    def day(self) -> str | None:
        """YYYY-MM-DD from SearXNG's publishedDate, or None when the result is undated."""
        match = DAY.match(self.publishedDate or "")
        return match.group(0) if match else None

    @property
    def snippets(self) -> list[str]:
        """The content's snippets, without the date our engine writes in front."""
        text = DATED.sub("", self.content, count=1)
        return [part for part in text.split(SNIPPET_SEPARATOR) if part.strip()]


@dataclass(frozen=True)
class SearchResponse:
    results: list[Result]
    engine_errors: list[str]
    """One line per failed engine, with the engine's own explanation when it gave one."""
    failures: list[EngineFailure] = field(default_factory=list)
    """The same failures, each with what happened and until when."""

    queries: int = 0
    """The Brave queries it spent: one for each of our engines it asked (named, or among
    SearXNG's defaults) that did not fail; 0 from the cache."""
    waited: float = 0.0
    """Seconds the search waited for the search plan's rate (app/search/governor.py)."""
    cached_age: float | None = None
    """Seconds since it was stored, when it came from the cache (app/search/searcher.py)."""

    @property
    def unavailable(self) -> str | None:
        """When no engine answered: what happened to each, and until when (a named
        failure, never an empty list of results)."""
        if self.results or not self.failures:
            return None
        return "no search engine could answer: " + "; ".join(f.told for f in self.failures)


Counter = Callable[[], Awaitable[None]]
"""Called once for each query sent towards the Brave plan (the service's count)."""


class Searxng:
    """A client of one SearXNG instance's JSON API."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 20.0,
        plan: PlanReader | None = None,
        count: Counter | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.plan = plan
        """The Brave plan our engine writes (names a 429's end); None: not known."""
        self.count = count
        self.suspensions = Suspensions()
        self.defaults: tuple[float, frozenset[str]] | None = None
        """When /config was read, and our engines SearXNG searches by default."""
        # Imported by the first client: the commands that search none start without aiohttp.
        from app.transport import AiohttpTransport

        self.http = httpx.AsyncClient(
            base_url=self.url, timeout=timeout, transport=AiohttpTransport()
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> Searxng:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def search(
        self,
        query: str,
        *,
        locale: str | None = None,
        engines: str | None = None,
        page: int = 1,
        time_range: str | None = None,
    ) -> SearchResponse:
        """One page of results. ``locale=None`` sends no language: SearXNG's default applies."""
        params = {"q": query, "format": "json", "pageno": str(page)}
        if locale:
            params["language"] = locale
        if engines:
            params["engines"] = engines
        if time_range:
            params["time_range"] = time_range
        asked = await self.brave_engines(engines)
        if self.count is not None:
            for _ in asked:
                await self.count()  # counted when sent, whoever searches
        data = await self.get_json("/search", params)
        try:
            results = [
                Result(
                    title=str(r.get("title") or ""),
                    url=str(r.get("url") or ""),
                    content=str(r.get("content") or ""),
                    publishedDate=r.get("publishedDate"),
                    engine=str(r.get("engine") or ""),
                )
                for r in data.get("results") or []
            ]
            failed = [
                (str(engine), str(message))
                for engine, message in data.get("unresponsive_engines") or []
            ]
        except (AttributeError, TypeError, ValueError) as exc:
            raise SearchError(
                f"SearXNG at {self.url} answered JSON that is not a search result ({exc})"
            ) from exc
        failures = await self.explain(failed) if failed else []
        self.suspensions.answered({result.engine for result in results})
        spent = len(asked - {engine for engine, _ in failed})  # Brave bills only answers
        return SearchResponse(results, [f.line for f in failures], failures, queries=spent)

    async def brave_engines(self, engines: str | None) -> frozenset[str]:
        """Our engines a search asks: those named, else those SearXNG searches by default
        (its /config, read once and trusted for DEFAULTS_SECONDS)."""
        if engines:
            return BRAVE_ENGINES & {e.strip() for e in engines.split(",")}
        now = time.monotonic()
        if self.defaults is None or now - self.defaults[0] > DEFAULTS_SECONDS:
            self.defaults = now, default_brave_engines(await self.configured_engines())
        return self.defaults[1]

    async def queries(self, engines: str | None) -> int:
        """The Brave queries a search with these engines (None: SearXNG's defaults) sends."""
        return len(await self.brave_engines(engines))

    async def get_json(self, path: str, params: dict[str, str] | None = None) -> SearxngObject:
        """The answer's JSON object. The timeout bounds the whole request, not each read:
        a SearXNG that trickles bytes fails too."""
        try:
            async with asyncio.timeout(self.timeout):
                response = await self.http.get(path, params=params)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise SearchError(
                f"SearXNG at {self.url} did not answer within {self.timeout:g} s (SEARXNG_TIMEOUT)"
            ) from exc
        except httpx.HTTPError as exc:
            self.defaults = None  # it may come back restarted, with other settings
            raise SearchError(
                f"SearXNG is not reachable at {self.url} ({exc.__class__.__name__}: {exc}); "
                "start it (python -m app searxng, or docker compose up) or fix SEARXNG_URL"
            ) from exc
        if response.status_code == 403:
            raise SearchError(
                f"SearXNG at {self.url} refused the JSON API (403): "
                "add json to search.formats in its settings.yml, or set server.limiter: "
                "false if its limiter blocks this client"
            )
        if response.status_code == 429:
            raise SearchError(
                f"SearXNG at {self.url} rate-limited this client (429): its limiter is on; "
                "set server.limiter: false in settings.yml for this internal instance"
            )
        if response.status_code == 400:
            raise QueryRefused(f"SearXNG refused the query: {response.text[:200]}")
        if response.status_code != 200:
            raise SearchError(
                f"SearXNG at {self.url} answered HTTP {response.status_code}: {response.text[:200]}"
            )
        try:
            data = jsoncodec.loads(response.content)
        except ValueError as exc:
            kind = response.headers.get("content-type", "no content type")
            raise SearchError(f"SearXNG at {self.url} did not answer JSON ({kind})") from exc
        if not isinstance(data, dict):
            raise SearchError(f"SearXNG at {self.url} answered JSON that is not an object")
        return data

    async def configured_engines(self) -> dict[str, SearxngObject]:
        """The engines this SearXNG has loaded, by name (its /config)."""
        answer = await self.get_json("/config")
        try:
            return engines_by_name(answer)
        except (AttributeError, TypeError, KeyError) as exc:
            raise SearchError(f"SearXNG at {self.url} answered a /config without engines") from exc

    async def loaded_engines(self) -> set[str]:
        """The names of the engines this SearXNG has loaded and enabled (its /config)."""
        engines = await self.configured_engines()
        return {name for name, engine in engines.items() if engine.get("enabled", True)}

    async def explain(self, failed: list[tuple[str, str]]) -> list[EngineFailure]:
        """Each failed engine, with the engine's own detail and the end of its suspension.

        SearXNG's search answer names only a category ("server API error"); what the
        engine said (Brave's error code and detail) is kept in /stats/errors, written by
        the engine's thread just after the category: a search that gave up waiting on that
        thread may answer before it, so a missing detail is looked for once more.
        """
        wanted = [(e, ERROR_CLASSES.get(m.removeprefix("Suspended: "))) for e, m in failed]
        stats = await self.error_stats()
        if any(kind and not engine_details(stats, engine, kind) for engine, kind in wanted):
            await asyncio.sleep(DETAILS_SETTLE_SECONDS)
            stats = await self.error_stats()
        plan = await asyncio.to_thread(self.plan.read) if self.plan is not None else None
        return [
            self.suspensions.name(engine, message, tuple(engine_details(stats, engine, kind)), plan)
            for (engine, message), (_, kind) in zip(failed, wanted, strict=True)
        ]

    async def error_stats(self) -> SearxngObject:
        try:
            return await self.get_json("/stats/errors")
        except SearchError:
            return {}


def engines_by_name(answer: SearxngObject) -> dict[str, SearxngObject]:
    """The engines of SearXNG's /config answer, by name; a TypeError, KeyError or
    AttributeError when it is not in SearXNG's shape."""
    return {str(engine["name"]): engine for engine in answer.get("engines", [])}


def default_brave_engines(engines: dict[str, SearxngObject]) -> frozenset[str]:
    """Our engines a search that names none asks: enabled, in SearXNG's default category
    (web search and LLM Context are a query each)."""
    return frozenset(
        name
        for name in BRAVE_ENGINES & engines.keys()
        if engines[name].get("enabled", True)
        and DEFAULT_CATEGORY in (engines[name].get("categories") or [])
    )


def engine_details(stats: SearxngObject, engine: str, wanted: str | None) -> list[str]:
    """The engine's own words for failures of this class in /stats/errors, when they are
    there in the shape SearXNG writes them (without them the category stands alone)."""
    try:
        return [
            str(entry["log_parameters"][0])
            for entry in stats.get(engine) or []
            if entry.get("exception_classname") == wanted and entry.get("log_parameters")
        ][:MAX_DETAILS]
    except (AttributeError, TypeError, KeyError, IndexError):
        return []
