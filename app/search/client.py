"""Searching through SearXNG's JSON API, with its failures turned into clear errors."""

from __future__ import annotations

import asyncio
import re
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from app import jsoncodec
from app.errors import ServiceError
from app.transport import AiohttpTransport

# SearXNG reports a failed engine by the class of its exception; this is the class
# behind each message, to find the engine's own words in /stats/errors.
ERROR_CLASSES = {
    "too many requests": "searx.exceptions.SearxEngineTooManyRequestsException",
    "server API error": "searx.exceptions.SearxEngineAPIException",
    "access denied": "searx.exceptions.SearxEngineAccessDeniedException",
    "CAPTCHA": "searx.exceptions.SearxEngineCaptchaException",
}
MAX_DETAILS = 3  # an engine's distinct error messages quoted per failure
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")


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

    @property
    def domain(self) -> str:
        """The host the result is on, as the page's chips and the lab show it."""
        return urlsplit(self.url).hostname or ""

    @property
    def day(self) -> str | None:
        """YYYY-MM-DD from SearXNG's publishedDate, or None when the result is undated."""
        match = DAY.match(self.publishedDate or "")
        return match.group(0) if match else None


@dataclass(frozen=True)
class SearchResponse:
    results: list[Result]
    engine_errors: list[str]
    """One line per failed engine, with the engine's own explanation when it gave one."""
    waited: float = 0.0
    """Seconds the search waited for the search plan's rate (app/search/governor.py)."""
    cached_age: float | None = None
    """Seconds since it was stored, when it came from the cache (app/search/searcher.py)."""


class Searxng:
    """A client of one SearXNG instance's JSON API."""

    def __init__(self, url: str, *, timeout: float = 20.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
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
        errors = await self.explain(failed) if failed else []
        return SearchResponse(results=results, engine_errors=errors)

    async def get_json(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
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

    async def loaded_engines(self) -> set[str]:
        """The names of the engines this SearXNG has loaded and enabled (its /config)."""
        listed = (await self.get_json("/config")).get("engines", [])
        return {
            name
            for engine in listed
            if engine.get("enabled", True) and isinstance(name := engine.get("name"), str) and name
        }

    async def explain(self, failed: list[tuple[str, str]]) -> list[str]:
        """'engine: message (the engine's own detail)' for each failed engine.

        SearXNG's search answer names only a category ("server API error"); what the
        engine said (Brave's error code and detail) is kept in /stats/errors.
        """
        try:
            stats = await self.get_json("/stats/errors")
        except SearchError:
            stats = {}
        lines = []
        for engine, message in failed:
            wanted = ERROR_CLASSES.get(message.removeprefix("Suspended: "))
            details = engine_details(stats, engine, wanted)
            if len(details) > 1:
                # SearXNG keeps one entry per distinct message, ordered by how often it
                # happened, never by when: which one is this search's cannot be told.
                lines.append(f"{engine}: {message} (one of: {'; '.join(details)})")
            else:
                lines.append(f"{engine}: {message}" + (f" ({details[0]})" if details else ""))
        return lines


def engine_details(stats: dict[str, Any], engine: str, wanted: str | None) -> list[str]:
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
