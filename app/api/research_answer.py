"""/v1's research (`"research": true` or its budget, docs/research.md): the run of
app/research/ on the last user message, its events told as the chat's completion events,
so /v1 shapes and streams them as it does an answer. The progress is reasoning, the
report the answer, each `[n]` of it a url_citation of a page read; closing the events
(the client's hang-up) stops the run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from urllib.parse import urlsplit

from app.api.openai_shapes import ResearchOptions
from app.chat.completion import CompletionEvent, CompletionRequest, citations
from app.chat.events import Source
from app.chat.fitting import message_text
from app.chat.services import Services
from app.config import ResearchDefaults
from app.model.failures import Failure, LLMError
from app.model.usage import Usage
from app.research.budget import Budget
from app.research.events import Finished, ResearchResult, progress_line
from app.research.start import prepared

logger = logging.getLogger(__name__)


def budget_of(options: ResearchOptions | bool, defaults: ResearchDefaults) -> Budget:
    """The budget a request asks for: the service's defaults for each bound it leaves out."""
    if isinstance(options, bool):
        return Budget.asked(defaults)
    return Budget.asked(defaults, options.searches, options.pages, options.minutes)


def question_of(request: CompletionRequest) -> str:
    """The question researched: the last user message's text."""
    asked = [m for m in request.messages if m.get("role") == "user"]
    return message_text(asked[-1]) if asked else ""


async def research_answer(
    services: Services, request: CompletionRequest, options: ResearchOptions | bool
) -> AsyncGenerator[CompletionEvent, None]:
    """The run's progress as reasoning lines, then its report as the answer, or its
    failure as the model server's (502)."""
    research = await prepared(
        question_of(request),
        budget_of(options, services.settings.research),
        settings=services.settings,
        searcher=services.searcher,
        client=services.model,
        locale=request.locale,
        model=request.model,
        extract=services.extraction,
    )
    try:
        async with aclosing(research.events()) as events:
            async for event in events:
                if isinstance(event, Finished):
                    for told in ended(event.result):
                        yield told
                elif request.activity and (line := progress_line(event)):
                    yield CompletionEvent("reasoning", line + "\n")
    except (GeneratorExit, asyncio.CancelledError):
        logger.info("v1 research stopped by the client: %s", research.spent)
        raise


def ended(result: ResearchResult) -> list[CompletionEvent]:
    """The report with its citations, or what was tried when nothing was found."""
    logger.info("v1 research ended: %s, stopped by %s", result.status, result.stopped_by)
    if result.status == "failed":
        raise LLMError(Failure.UPSTREAM, f"the research failed: {result.error}")
    text = result.report if result.status != "nothing_found" else result.tried_text()
    sources = sources_of(result)
    spent = result.spent
    usage = Usage(prompt_tokens=spent.prompt_tokens, completion_tokens=spent.completion_tokens)
    done = CompletionEvent("done", usage=usage, citations=citations(text, sources), sources=sources)
    return [CompletionEvent("delta", text), done]


def sources_of(result: ResearchResult) -> list[Source]:
    """The run's sources as an answer's, numbered 1, 2... as the report cites them."""
    return [
        {
            "url": s["url"],
            "title": s["title"],
            "domain": urlsplit(s["url"]).hostname or "",
            "date": None,
            "read": s["read"],
        }
        for s in result.sources
    ]
