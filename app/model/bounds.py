"""How long each wait on the model server may take (Limits and the probes' bounds), and
the one timer that keeps a streamed request within its limits (Bounds; its cost per
event is measured in docs/performance.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import TypeVar

from httpx_sse import ServerSentEvent

from app import config
from app.model.failures import Failure, LLMError

T = TypeVar("T")

CONNECT_SECONDS = 10.0
# The served-window and model-list probes run before a turn's first request: a server that
# hangs must not hold the turn up for long, so each probe waits at most this (and never
# longer than a first byte may take).
WINDOW_PROBE_SECONDS = 2.0
MODELS_PROBE_SECONDS = 5.0
DRAIN_SECONDS = 0.2
"""How long the end of a body is waited for after [DONE], to keep the connection."""


@dataclass(frozen=True)
class Limits:
    """How long one model request may take; each bound catches a different way to hang."""

    first_byte: float = 60.0
    """Request sent to response headers: a server that accepted and never answers."""
    idle: float = 300.0
    """Between two events of a stream (headers to first event included): a stalled stream."""
    total: float = 900.0
    """The whole request: a stream that never ends, or a non-streamed answer that never comes."""

    @classmethod
    def from_settings(cls, settings: config.Settings) -> Limits:
        return cls(
            first_byte=settings.llm_first_byte_timeout,
            idle=settings.llm_idle_timeout,
            total=settings.llm_total_timeout,
        )

    def probe(self, seconds: float) -> float:
        """A probe's bound: its own, and never more than a first byte may take."""
        return min(seconds, self.first_byte)


class Bounds:
    """The limits of one streamed request, kept by a single timer: each step (the answer's
    headers, an error body, the next event) must end within its own limit and within the
    request's total. asyncio.timeout around each step armed and cancelled a timer per
    event, a sixth of the service's CPU per streamed token; this timer is set again only
    when it fires early or a step must end sooner.

    Steps are awaits, never a ``yield``: when the timer fires while the consumer holds an
    event, no step is waiting and nothing is cancelled."""

    def __init__(self, limits: Limits) -> None:
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a streamed request runs in a task")
        self.task = task
        self.limits = limits
        self.deadline = self.loop.time() + limits.total
        self.until: float | None = None
        """When the step now waiting must be over; None between steps."""
        self.timer: asyncio.Handle | None = None
        self.timer_at = 0.0
        """When the timer fires: kept here, since uvloop's call_at gives a plain Handle
        (no when()) for a time already past."""
        self.expired = False

    async def step(self, seconds: float, awaitable: Awaitable[T], *, silent: str) -> T:
        """`awaitable`'s result; LLMError (`silent`, or the total's) when it takes too long."""
        self.until = until = min(self.loop.time() + seconds, self.deadline)
        if self.timer is None or self.timer_at > until:
            if self.timer is not None:
                self.timer.cancel()
            self.arm(until)
        cancelling = self.task.cancelling()
        try:
            return await awaitable
        except asyncio.CancelledError:
            # Ours only if no other cancellation (Stop) came meanwhile, as asyncio.timeout.
            if not self.expired or self.task.uncancel() > cancelling:
                raise
            self.expired = False
            if until >= self.deadline:
                raise LLMError(
                    Failure.UPSTREAM,
                    f"the model server's answer went on past {self.limits.total:g} s "
                    "(LLM_TOTAL_TIMEOUT)",
                ) from None
            raise LLMError(Failure.NETWORK, silent) from None
        finally:
            self.until = None

    def check(self) -> None:
        self.timer = None
        if self.until is None:
            return  # between steps: the next one sets the timer
        if self.loop.time() < self.until:
            self.arm(self.until)
            return
        self.expired = True
        self.task.cancel()

    def arm(self, when: float) -> None:
        self.timer = self.loop.call_at(when, self.check)
        self.timer_at = when

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


async def next_event(
    bounds: Bounds, events: AsyncIterator[ServerSentEvent], silent: str
) -> ServerSentEvent | None:
    """The stream's next event within the idle limit, or None at its end."""
    try:
        return await bounds.step(bounds.limits.idle, anext(events), silent=silent)
    except StopAsyncIteration:
        return None
