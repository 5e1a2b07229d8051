"""The MCP server's tools: web_search, web_fetch and measure_locale, run for an agent.

The same work as the page's tools, a layer below: the search through our SearXNG (its text
formatted as app.chat.tools formats it for our model), the page through the safe fetcher
and the extraction process, the measurement of app.search.language. What the web says is
wrapped as untrusted data, as for our model. Unlike the page's web_fetch, any address may
be asked for (for an MCP client the agent is the user, and it gives the addresses); the
address policy (no private network, no metadata address, no odd port) applies in full.

A refusal or a failure is a tool error (``isError``) that says why, never a crash.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from app import config
from app.chat.tools import result_entry, results_text, untrusted
from app.errors import ServiceError
from app.pages.errors import FetchFailed, FetchRefused
from app.pages.fetch import Extract, Part, fetch_page, page_part
from app.search import lab, language
from app.search.client import SearchError
from app.search.searcher import Searcher

TIME_RANGES = ("day", "week", "month", "year")


class SearchHit(BaseModel):
    title: str
    url: str
    date: str | None = Field(description="publication date, YYYY-MM-DD; null when undated")
    snippets: list[str] = Field(description="the description and Brave's extra snippets")
    language: str = Field(description="ISO 639-1 code detected on the title and snippets")
    engine: str = Field(description="the SearXNG engine that found it")


class SearchOutput(BaseModel):
    query: str
    locale: str
    page: int
    results: list[SearchHit]
    engine_errors: list[str] = Field(description="engines that failed, with their reason")


class LocaleCount(BaseModel):
    locale: str
    in_target: int = Field(description="results detected in the target language")
    total: int = Field(description="results read for this locale")


class MeasureOutput(BaseModel):
    query: str
    target: str
    top: int
    rows: list[LocaleCount]


@dataclass
class WebTools:
    """What the tools run on: SearXNG, the settings (locale, fetch limits) and the
    extractor (the service's extraction process, or the stdio server's own)."""

    searcher: Searcher
    settings: config.Settings
    extract: Extract

    async def search(
        self,
        query: str,
        locale: str | None = None,
        engines: str | None = None,
        page: int = 1,
        time_range: str | None = None,
    ) -> CallToolResult:
        query = query.strip()
        if not query:
            raise ToolError("search refused: the query is empty")
        if time_range is not None and time_range not in TIME_RANGES:
            raise ToolError(f"time_range must be one of {', '.join(TIME_RANGES)}")
        try:
            chosen = config.check_locale((locale or "").strip() or self.settings.search_locale)
            names = await lab.check_engines(self.searcher, engines or "")
            response = await self.searcher.search(
                query, locale=chosen, engines=names, page=page, time_range=time_range
            )
        except config.ConfigError as exc:
            raise ToolError(f"search refused: {exc}") from exc
        except SearchError as exc:
            raise tool_failure("search failed", str(exc), "web_search") from exc
        except ServiceError as exc:  # an engine this SearXNG lacks
            raise ToolError(f"search refused: {exc}") from exc
        if unavailable := response.unavailable:  # named: what happened, until when
            raise tool_failure("search failed", unavailable, "web_search")
        results = response.results
        languages = await asyncio.to_thread(language.detect_results, results)
        entries = [result_entry(n, r) for n, r in enumerate(results, 1)]
        output = SearchOutput(
            query=query,
            locale=chosen,
            page=page,
            results=[
                SearchHit(
                    title=r.title,
                    url=r.url,
                    date=r.day,
                    snippets=r.snippets,
                    language=lang,
                    engine=r.engine,
                )
                for r, lang in zip(results, languages, strict=True)
            ],
            engine_errors=response.engine_errors,
        )
        return CallToolResult(
            content=[TextContent(type="text", text=results_text(query, entries))],
            structured_content=output.model_dump(mode="json"),
        )

    async def fetch(self, url: str, max_tokens: int | None = None, start: int = 0) -> str:
        try:
            page = await fetch_page(
                url.strip(),
                allow_hosts=self.settings.fetch_allow_hosts,
                timeout=self.settings.fetch_timeout,
                extract=self.extract,
            )
        except FetchRefused as exc:
            raise ToolError(f"fetch refused: {exc}") from exc
        except FetchFailed as exc:
            raise tool_failure("fetch failed", str(exc), "web_fetch") from exc
        part = page_part(page, start, max_tokens or self.settings.fetch_max_tokens)
        header = (f"Title: {page.title}\n" if page.title else "") + f"URL: {page.url}\n\n"
        body = part.text or (
            "(the page has no readable text)" if not page.text else "(nothing after this point)"
        )
        return f"{part_line(part)}\n\n{untrusted(header + body, 'web_fetch')}"

    async def measure(
        self,
        query: str,
        locales: list[str] | None = None,
        target: str | None = None,
        top: int = 20,
    ) -> CallToolResult:
        try:
            found = await lab.measurement(
                self.searcher,
                query,
                locales=",".join(locales or []),
                locale="",
                target=target or "",
                top=str(top),
                engines="",
                home=self.settings.search_locale,
            )
        except SearchError as exc:
            raise tool_failure("measurement failed", str(exc), "measure_locale") from exc
        except ServiceError as exc:  # a bad locale, target or count
            raise ToolError(f"measurement refused: {exc}") from exc
        rows = [
            LocaleCount(locale=r.locale, in_target=r.in_target, total=r.total) for r in found.rows
        ]
        output = MeasureOutput(query=found.query, target=found.target, top=found.top, rows=rows)
        lines = [f"Results in '{found.target}' among the top {found.top} for {found.query!r}:"]
        lines += [f"{r.locale}: {r.in_target}/{r.total}" for r in rows]
        return CallToolResult(
            content=[TextContent(type="text", text="\n".join(lines))],
            structured_content=output.model_dump(mode="json"),
        )


def part_line(part: Part) -> str:
    """Where this part lies in the page, and how to read the rest: ours, outside the
    untrusted block."""
    where = f"characters {part.start:,}-{part.end:,} of {part.total:,}"
    if not part.parts_left:
        return f"The page's text, {where}: the end of the page."
    return (
        f"The page's text, {where}; about {part.parts_left} more part(s): call web_fetch "
        f"again with start={part.end} for the next."
    )


def tool_failure(what: str, detail: str, source: str) -> ToolError:
    """A failure that may quote a server (an error body, an engine's message): the detail
    reaches the agent as untrusted data, as it reaches our model."""
    return ToolError(f"{what}:\n{untrusted(detail, source)}")
