"""The limits of a streamed model request (app.model.bounds.Bounds): each wait on the server is
bounded, the consumer's own time between events is not, and Stop stays a cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from app.model.bounds import Bounds, Limits
from app.model.failures import LLMError


def run(coroutine):
    return asyncio.run(coroutine)


@contextmanager
def bounded(first_byte: float, idle: float, total: float) -> Iterator[Bounds]:
    """A request's bounds, their timer cancelled at the end, as ModelClient.stream does."""
    bounds = Bounds(Limits(first_byte=first_byte, idle=idle, total=total))
    try:
        yield bounds
    finally:
        bounds.close()


def test_a_step_within_its_limit_returns_its_result():
    async def scenario() -> str:
        with bounded(1.0, 1.0, 5.0) as bounds:
            return await bounds.step(0.5, asyncio.sleep(0.05, "event"), silent="too slow")

    assert run(scenario()) == "event"


def test_a_step_over_its_limit_fails_with_its_own_words():
    async def scenario() -> None:
        with bounded(1.0, 0.1, 5.0) as bounds:
            await bounds.step(0.1, asyncio.sleep(5), silent="sent nothing for 0.1 s")

    with pytest.raises(LLMError) as failure:
        run(scenario())
    assert failure.value.kind == "network" and failure.value.message == "sent nothing for 0.1 s"


def test_the_consumers_time_between_events_is_not_the_servers():
    """A page slow to take an event (or a checkpoint being written) is not an idle server."""

    async def scenario() -> list[str]:
        got = []
        with bounded(0.2, 0.2, 5.0) as bounds:
            for n in range(3):
                got.append(await bounds.step(0.2, asyncio.sleep(0.01, f"event {n}"), silent="x"))
                await asyncio.sleep(0.5)  # the consumer holds the event
        return got

    assert run(scenario()) == ["event 0", "event 1", "event 2"]


def test_a_shorter_limit_after_a_longer_one_still_applies():
    async def scenario() -> None:
        with bounded(30.0, 0.1, 60.0) as bounds:
            await bounds.step(30.0, asyncio.sleep(0.01), silent="no headers")
            await bounds.step(0.1, asyncio.sleep(5), silent="idle")

    with pytest.raises(LLMError, match="idle"):
        run(asyncio.wait_for(scenario(), timeout=3))


def test_the_total_limit_names_itself():
    async def scenario() -> None:
        with bounded(1.0, 1.0, 0.3) as bounds:
            for _ in range(10):
                await bounds.step(1.0, asyncio.sleep(0.1), silent="idle")

    with pytest.raises(LLMError) as failure:
        run(scenario())
    assert failure.value.kind == "upstream" and "LLM_TOTAL_TIMEOUT" in failure.value.message


def test_stop_during_a_step_is_a_cancellation_not_a_timeout():
    async def scenario() -> None:
        async def streaming() -> None:
            with bounded(0.2, 0.2, 5.0) as bounds:
                await bounds.step(0.2, asyncio.sleep(5), silent="idle")

        task = asyncio.create_task(streaming())
        await asyncio.sleep(0.05)
        task.cancel()  # Stop, before the limit
        await asyncio.sleep(0.3)  # past it: the timer must not turn Stop into a failure
        await task

    with pytest.raises(asyncio.CancelledError):
        run(scenario())


def test_under_uvloop_a_request_past_its_total_ends_in_its_kind_not_a_crash():
    """The service runs on uvloop, whose call_at gives a plain Handle (no when()) for a
    time already past: steps that return at once after the total has run out must still
    end the request as "went on past LLM_TOTAL_TIMEOUT", not with an AttributeError."""
    uvloop = pytest.importorskip("uvloop")

    async def ready() -> str:
        return "event"

    async def scenario() -> tuple[list[str], LLMError]:
        with bounded(first_byte=5, idle=5, total=0) as bounds:
            got = [await bounds.step(5, ready(), silent="idle") for _ in range(3)]
            with pytest.raises(LLMError) as caught:
                await bounds.step(5, asyncio.sleep(5), silent="idle")
        return got, caught.value

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        got, error = runner.run(scenario())
    assert got == ["event"] * 3
    assert error.kind == "upstream" and "LLM_TOTAL_TIMEOUT" in str(error)
