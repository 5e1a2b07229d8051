"""The MCP server's `research` tool: a research run (app/research/, docs/research.md) for
an agent. Its progress goes out as MCP progress notifications (`notifications/progress`,
to a client that sent a progressToken), one per step, search and page; its result is the
report with its sources as structured content, the command's --json object. A cancelled
call (`notifications/cancelled`, or the client gone) cancels the run's task, which lets
the model's request in flight go."""

from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from dataclasses import dataclass

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from app import config
from app.errors import ServiceError
from app.mcp.asker import ASKER
from app.model.client import ModelClient
from app.pages.fetch import Extract
from app.research.budget import Budget
from app.research.events import Finished, ResearchResult, Status, progress_line
from app.research.start import prepared
from app.search.searcher import Searcher

logger = logging.getLogger(__name__)

RESEARCH_DESCRIPTION = (
    "Researches a question: plans sub-questions and searches, reads the best results, "
    "keeps quoted notes, and writes a report from the notes only, each claim citing [n] a "
    "page read. Minutes, not seconds: progress is reported (send a progressToken). Cost: "
    "up to `searches` Brave queries (default 12), `pages` pages read (default 20). A run "
    "that finds nothing says what it tried and writes no report."
)


class SourceOut(BaseModel):
    n: int = Field(description="the number the report cites it by, [n]")
    url: str
    title: str
    read: bool = Field(description="the page was read (else a result seen, not read)")


class SpentOut(BaseModel):
    searches: int
    searches_cached: int = Field(description="searches the cache answered: no Brave query")
    pages: int
    seconds: float
    prompt_tokens: int
    completion_tokens: int


class ResearchOutput(BaseModel):
    """The run's result, as `python -m app research --json` prints it."""

    status: Status
    report: str = Field(
        description="Markdown, its sources listed at the end; empty when nothing was found"
    )
    plan: list[str] = Field(description="the sub-questions")
    sources: list[SourceOut]
    not_found: list[str] = Field(description="sub-questions no page answered")
    spent: SpentOut
    stopped_by: str | None = Field(
        description="the bound that ended the searching (searches, pages, minutes, tokens, "
        "search_unavailable), or null"
    )


@dataclass
class ResearchTool:
    """What a run needs beside its question: the searcher, the settings, the model, the
    extractor (as WebTools')."""

    searcher: Searcher
    settings: config.Settings
    client: ModelClient
    extract: Extract

    async def run(self, question: str, locale: str, budget: Budget, ctx: Context) -> CallToolResult:
        try:
            research = await prepared(
                question,
                budget,
                settings=self.settings,
                searcher=self.searcher,
                client=self.client,
                locale=locale or self.settings.search_locale,
                extract=self.extract,
                person=ASKER.get(),
            )
        except ServiceError as exc:  # no model, a locale SearXNG cannot take
            raise ToolError(f"research refused: {exc}") from exc
        told = 0
        try:
            async with aclosing(research.events()) as events:
                async for event in events:
                    if isinstance(event, Finished):
                        return answered(event.result)
                    if line := progress_line(event):
                        told += 1
                        await ctx.report_progress(told, message=line)
        except asyncio.CancelledError:
            logger.info("mcp research cancelled: %s", research.spent)
            raise
        raise RuntimeError("a research ends with its result")


def answered(result: ResearchResult) -> CallToolResult:
    """The report (or what was tried) as text, the result as structured content; a failed
    run is a tool error that says why."""
    logger.info("mcp research ended: %s, stopped by %s", result.status, result.stopped_by)
    if result.status == "failed":
        raise ToolError(f"research failed: {result.error}")
    text = result.tried_text() if result.status == "nothing_found" else result.report
    output = ResearchOutput.model_validate(result.as_dict())
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=output.model_dump(mode="json"),
    )
