"""The MCP server's tools: web_search, web_fetch and measure_locale, run for an agent.

web_search and web_fetch are the tools of our registry (app/chat/registry.py): the same
arguments, checked by the same models, and the same text as our model reads (the results
as app.search.client formats them, a page's part as app.pages.fetch does), with structured
content beside it. Their run is the agent's: unlike our model's web_fetch, any address may
be asked for (for an MCP client the agent is the user, and it gives the addresses); the
address policy (no private network, no metadata address, no odd port) applies in full.
What the web says is wrapped as untrusted data, as for our model.

A refusal or a failure is a tool error (``isError``) that says why, never a crash.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from app import config
from app.chat.web_fetch import FetchArguments
from app.chat.web_search import SearchArguments
from app.errors import ServiceError
from app.mcp.asker import ASKER
from app.pages.errors import FetchFailed, FetchRefused
from app.pages.fetch import Extract, fetch_page, part_for_model
from app.search import lab, language
from app.search.client import SearchError
from app.search.searcher import Searcher
from app.webtext import MAX_QUERY_CHARS, results_text, untrusted


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

    async def search(self, arguments: SearchArguments) -> CallToolResult:
        query, page = arguments.query.strip(), arguments.page
        if not query:
            raise ToolError("search refused: the query is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise ToolError(f"search refused: the query has more than {MAX_QUERY_CHARS} characters")
        try:
            locale = (arguments.locale or "").strip() or self.settings.search_locale
            chosen = config.check_locale(locale)
            names = await lab.check_engines(self.searcher, arguments.engines or "")
            response = await self.searcher.search(
                query,
                locale=chosen,
                engines=names,
                page=page,
                time_range=arguments.time_range,
                person=ASKER.get(),
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
        entries = [r.for_model(n) for n, r in enumerate(results, 1)]
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

    async def fetch(self, arguments: FetchArguments) -> str:
        limit = self.settings.fetch_max_tokens
        try:
            page = await fetch_page(
                arguments.url.strip(),
                allow_hosts=self.settings.fetch_allow_hosts,
                timeout=self.settings.fetch_timeout,
                extract=self.extract,
            )
        except FetchRefused as exc:  # may quote where a page redirected to
            raise tool_failure("fetch refused", str(exc), "web_fetch") from exc
        except FetchFailed as exc:
            raise tool_failure("fetch failed", str(exc), "web_fetch") from exc
        return part_for_model(page, arguments.start, min(arguments.max_tokens or limit, limit))

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


def tool_failure(what: str, detail: str, source: str) -> ToolError:
    """A failure or refusal that may quote a server (an error body, an engine's message, a
    redirect's address): the detail reaches the agent as untrusted data, as it reaches our
    model."""
    return ToolError(f"{what}:\n{untrusted(detail, source)}")
