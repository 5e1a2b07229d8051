"""A research run made ready from the settings: the model and its served window, the
budget's tokens from that window, the tools' runner on the caller's Searcher."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from app import config
from app.chat.context import effective_budget
from app.chat.tools import ToolRunner
from app.errors import ServiceError
from app.model.client import ModelClient
from app.pages.fetch import Extract, extract_in_thread
from app.research.budget import Budget, Spent, tokens_for
from app.research.run import READS_PER_SEARCH, Approval, Research
from app.research.writer import Writer
from app.search.searcher import Searcher


class NoModel(ServiceError):
    """No model is configured to research with."""

    status = 400


async def prepared(
    question: str,
    budget: Budget,
    *,
    settings: config.Settings,
    searcher: Searcher,
    client: ModelClient,
    locale: str,
    stop: asyncio.Event | None = None,
    model: str | None = None,
    extract: Extract = extract_in_thread,
    approve: Approval | None = None,
    person: int | None = None,
) -> Research:
    """The run, its budget's tokens derived from the window its model is served with;
    the model the caller names (a /v1 request's), else DEFAULT_MODEL; pages extracted by
    `extract` (the service's extraction process, else a thread); searched with `person`'s
    search cache (household mode)."""
    model = model or settings.default_model
    if not model:
        raise NoModel("no model to research with: set DEFAULT_MODEL (or MODELS)")
    served = await client.served_window(model)
    window = effective_budget(settings.context_budget_tokens, served)
    budget = replace(budget, tokens=tokens_for(window))
    runner = ToolRunner(
        searcher,
        settings,
        config.check_locale(locale),
        None,
        {"web_search": budget.searches, "web_fetch": budget.pages * READS_PER_SEARCH},
        history=[{"role": "user", "content": question}],
        extract=extract,
        person=person,
    )
    writer = Writer(client, model, settings.model_params.get(model, {}), Spent())
    return Research(
        question,
        budget,
        writer,
        runner,
        window,
        settings.max_completion_tokens,
        stop=stop or asyncio.Event(),
        approve=approve,
    )
