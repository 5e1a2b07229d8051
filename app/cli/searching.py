"""A command's SearXNG and its searches, made as the service makes its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from app import config

if TYPE_CHECKING:
    from app.search.client import Counter
    from app.search.searcher import Searcher


@contextlib.contextmanager
def searxng_url(settings: config.Settings, *, supervise: bool = False) -> Iterator[str]:
    """SEARXNG_URL when set, else an embedded SearXNG for the command's duration."""
    if settings.searxng_url:
        yield settings.searxng_url
        return
    from app.search import embedded

    with embedded.EmbeddedSearxng(
        settings.search_locale, settings=settings, supervise=supervise
    ) as running:
        yield running.url


def counted(settings: config.Settings) -> Counter:
    """A command's searches counted in DATA_DIR's chat.db, as the service counts its own
    (once the service has made it: a command creates no data directory)."""
    from app.store.database import Database, stored

    def count_in() -> None:
        if (path := stored(settings.data_dir, settings.database_url)) is not None:
            database = Database(path)
            try:
                database.count_search()
            finally:
                database.close()

    async def count() -> None:
        await asyncio.to_thread(count_in)

    return count


def searcher(url: str, settings: config.Settings) -> Searcher:
    """The service's way of searching, for a command: paced to the Brave plan's rate (or
    SEARCH_RATE), retried once when rate-limited, counted with the service's searches;
    without the cache: a command asks SearXNG every time. Its governor is local to the
    command's process (no store): a command makes one search and has no storage thread
    to share the turn through. Should its one query and a service's meet within Brave's
    second, the 429 is retried once after the reset (Searcher)."""
    from app.search.client import Searxng
    from app.search.plan import PlanReader
    from app.search.searcher import Searcher

    plan = PlanReader(settings.search_plan_file, settings.search_rate)
    client = Searxng(url, timeout=settings.searxng_timeout, plan=plan, count=counted(settings))
    return Searcher.of_plan(client, plan)
