"""The governor: every search of the service, in every conversation, the lab and the
commands, waits its turn so that together they keep to the search plan's rate (Brave's
free plan: 1 query a second). A search beyond the rate queues instead of failing; how long
it waited goes to the trail (docs/search-spend.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

MIN_RATE = 0.01
"""Searches a second at the slowest, whatever the plan says (one every 100 s)."""
GUARD_SECONDS = 0.05
"""Added to each interval: SearXNG forwards a search to Brave a few milliseconds after it
receives it, not always the same few, and Brave counts its second at its end."""


class Governor:
    """Hands out one start time per search, each at least ``1 / rate()`` seconds after the
    one before, in the order they were asked for. ``rate`` is read at every search: the
    plan's rate as the latest answer told it, or SEARCH_RATE."""

    def __init__(
        self,
        rate: Callable[[], float],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.clock = clock
        self.next_at = float("-inf")
        """When the next search may start."""

    def reserve(self) -> float:
        """Book the next start time; the seconds until it (0 when it is now). No await
        happens between reading and booking, so concurrent searches each get their own."""
        now = self.clock()
        start = max(now, self.next_at)
        self.next_at = start + 1 / max(self.rate(), MIN_RATE) + GUARD_SECONDS
        return start - now

    async def turn(self) -> float:
        """Wait for this search's turn; the seconds waited. A search cancelled while it
        waits leaves its slot unused (the rate is kept, never exceeded)."""
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)
        return wait
