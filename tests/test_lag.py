"""LOOP_LAG_PROBE: how late the event loop ran, and where it was held when a stall was long."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from app.lag import STALL_LOG_MS, LagProbe


def hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # what a blocking call in a handler does to every stream


def test_a_stall_is_measured_and_logged_with_the_stack_that_held_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> float:
        probe = LagProbe()
        probe.start()
        await asyncio.sleep(0.05)
        probe.take()
        hold_the_loop(STALL_LOG_MS * 3 / 1000)
        await asyncio.sleep(0.05)
        stalled = probe.take()
        await probe.stop()
        return stalled

    with caplog.at_level(logging.WARNING, logger="app.lag"):
        stalled = asyncio.run(scenario())
    assert stalled >= STALL_LOG_MS * 2
    reports = [r.getMessage() for r in caplog.records if r.name == "app.lag"]
    assert any("event loop held" in r and "hold_the_loop" in r for r in reports)


def test_the_watchdog_sleeps_while_the_loop_keeps_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each wake of the watchdog takes the GIL from a busy loop: on a healthy loop it wakes
    about once per STALL_LOG_MS, not every few milliseconds (which cost the probe 54 ms of
    CPU a second with nothing to do)."""
    wakes = []
    real_sleep = time.sleep

    def counted_sleep(seconds: float) -> None:
        wakes.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr("app.lag.time.sleep", counted_sleep)

    async def scenario() -> None:
        probe = LagProbe()
        probe.start()
        await asyncio.sleep(0.5)
        await probe.stop()

    asyncio.run(scenario())
    assert 0 < len(wakes) <= 0.5 / (STALL_LOG_MS / 1000) * 1.5 + 2
