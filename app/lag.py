"""How late the event loop runs: a ticker that sleeps a fixed interval and records how much
longer than asked each sleep took. A stream stalls exactly as long as the loop is late, so
this is what a user feels when one request blocks the others (LOOP_LAG_PROBE=1)."""

from __future__ import annotations

import asyncio
import time

TICK_SECONDS = 0.005


class LagProbe:
    """The worst lateness seen since the last `take()`, in milliseconds."""

    def __init__(self) -> None:
        self.worst_ms = 0.0
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    def take(self) -> float:
        worst, self.worst_ms = self.worst_ms, 0.0
        return round(worst, 2)

    async def _tick(self) -> None:
        while True:
            asked = time.perf_counter() + TICK_SECONDS
            await asyncio.sleep(TICK_SECONDS)
            self.worst_ms = max(self.worst_ms, (time.perf_counter() - asked) * 1000)
