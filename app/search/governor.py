"""The governor: every search of the service, in every conversation, the lab and the
commands, waits its turn so that together they keep to the search plan's rate (Brave's
free plan: 1 query a second). A search beyond the rate queues instead of failing; how long
it waited goes to the trail (docs/search-spend.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

MIN_RATE = 0.01
"""Searches a second at the slowest, whatever the plan says (one every 100 s)."""


class Governor:
    """One search at a time, each starting at least ``1 / rate()`` seconds after the one
    before it ended, in the order they asked.

    Counted from the end, not the start: when SearXNG forwards a search to Brave is known
    only to be between our request and its answer (a first search, or a new connection,
    can take a fifth of a second longer there), so only this spacing keeps any two
    queries a whole second apart at Brave. ``rate`` is read at every search: the plan's
    rate as Brave's latest answer told it, or SEARCH_RATE."""

    def __init__(
        self, rate: Callable[[], float], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.clock = clock
        self.lock = asyncio.Lock()  # first come, first served
        self.next_at = float("-inf")
        """When the next search may start."""
        self.queued = 0
        """Searches holding their turn or waiting for it."""

    def expected_wait(self) -> float:
        """About how long a search asking now would wait for its turn, for the trail to
        say while it waits: what is left of the pause after the last search, and one
        interval for each search ahead of it (their own time at Brave not counted)."""
        interval = 1 / max(self.rate(), MIN_RATE)
        return max(0.0, self.next_at - self.clock()) + self.queued * interval

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """Hold the search's turn while it runs; gives the seconds it waited for it. A
        search cancelled (Stop) or failed ends its turn all the same."""
        asked = self.clock()
        self.queued += 1
        try:
            async with self.lock:
                if (wait := self.next_at - self.clock()) > 0:
                    await asyncio.sleep(wait)
                try:
                    yield self.clock() - asked
                finally:
                    self.next_at = self.clock() + 1 / max(self.rate(), MIN_RATE)
        finally:
            self.queued -= 1
