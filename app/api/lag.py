"""How late the event loop runs: a ticker that sleeps a fixed interval and records how much
longer than asked each sleep took. A stream stalls exactly as long as the loop is late, so
this is what a user feels when one request blocks the others (LOOP_LAG_PROBE=1).

Lateness has two causes: the loop's own work (a long step, a wait for the GIL) and, on a
busy machine, the loop's thread waiting for a core while other processes run. Linux counts
the second per thread (schedstat's run delay), so the probe also reports the worst
lateness with that wait taken out: what the service itself held the loop for.

A watchdog thread also logs where the loop was when it ran later than STALL_LOG_MS: the
stack of whatever held it, which is the way to find what to move off the loop."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.005
STALL_LOG_MS = 20.0
WATCH_SECONDS = 0.002


class LagProbe:
    """The worst lateness seen since the last `take()`, in milliseconds, with and without
    the time the loop waited for a core."""

    def __init__(self) -> None:
        self.worst_ms = 0.0
        self.worst_own_ms = 0.0
        self.task: asyncio.Task[None] | None = None
        self.beat = time.perf_counter()
        self.watching = threading.Event()

    def start(self) -> None:
        self.beat = time.perf_counter()
        self.task = asyncio.create_task(self._tick())
        self.watching.set()
        loop_thread = threading.get_ident()
        threading.Thread(target=self._watch, args=(loop_thread,), daemon=True).start()

    async def stop(self) -> None:
        self.watching.clear()
        if self.task:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    def take(self) -> tuple[float, float | None]:
        """(worst lateness, worst lateness less its waits for a core); the second is None
        where the system does not count those waits."""
        worst, own = self.worst_ms, self.worst_own_ms
        self.worst_ms = self.worst_own_ms = 0.0
        return round(worst, 2), round(own, 2) if CORE_WAITS else None

    async def _tick(self) -> None:
        with core_waits() as waited_ms:
            waited = waited_ms()  # read once a tick: its end is the next one's start
            while True:
                asked = time.perf_counter() + TICK_SECONDS
                await asyncio.sleep(TICK_SECONDS)
                self.beat = time.perf_counter()
                late_ms = (self.beat - asked) * 1000
                before, waited = waited, waited_ms()
                self.worst_ms = max(self.worst_ms, late_ms)
                self.worst_own_ms = max(self.worst_own_ms, late_ms - (waited - before))

    def _watch(self, loop_thread: int) -> None:
        """Sleeps until the loop would be late enough to report, from its last beat: a few
        wakes per STALL_LOG_MS, not a poll every few ms (each wake takes the GIL, which a
        busy loop then has to hand over)."""
        logged = 0.0
        while self.watching.is_set():
            beat = self.beat
            late_ms = (time.perf_counter() - beat) * 1000 - TICK_SECONDS * 1000
            if late_ms <= STALL_LOG_MS:
                time.sleep((STALL_LOG_MS - late_ms) / 1000 + WATCH_SECONDS)
                continue
            if beat != logged:
                logged = beat  # one report per stall
                frame = sys._current_frames().get(loop_thread)
                stack = "".join(traceback.format_stack(frame)[-12:]) if frame else "(gone)\n"
                logger.warning("event loop held for over %.0f ms, at:\n%s", late_ms, stack)
            time.sleep(TICK_SECONDS)


CORE_WAITS = Path("/proc/thread-self/schedstat").exists()


@contextmanager
def core_waits() -> Iterator[Callable[[], float]]:
    """A function giving how long, in ms, the calling thread has waited for a core (Linux's
    run delay, the second figure of schedstat); 0 where it is not counted."""
    if not CORE_WAITS:
        yield lambda: 0.0
        return
    fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    try:
        yield lambda: int(os.pread(fd, 100, 0).split()[1]) / 1e6
    finally:
        os.close(fd)
