"""Several replicas of one database keep to the search plan's rate together (issue 26).

Found by bench/scale_load.py: with two replicas behind the proxy, the searches of 50
conversations took half as long as with one, because each replica's governor
(app/search/governor.py, an asyncio lock and a clock in the process) spaces only its own
searches. On Brave's free plan (1 query a second) two replicas searching at once send two
a second, and Brave refuses half of them with 429 RATE_LIMITED. The governor's turn is now
shared through the database (app/store/search_pace.py); these tests hold it to that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.search.governor import Governor
from app.store.storage import Storage
from tests.conftest import ChatService, chat_env
from tests.fakes.brave_api import SEARCH_PATH

SEARCHES_PER_REPLICA = 2


def test_two_replicas_of_one_database_search_at_most_one_a_second_together(
    llm, searxng, brave, tmp_path, database_url
):
    env = chat_env(llm, tmp_path, SEARCH_RATE="1", DATABASE_URL=database_url)
    replicas = [ChatService(env, searxng.url).start() for _ in range(2)]
    tag = f"replicas pacing {database_url or 'sqlite'}"
    try:

        def search(replica: ChatService, n: int) -> None:
            response = httpx.get(
                f"{replica.url}/api/lab/search", params={"q": f"{tag} {n}"}, timeout=60
            )
            assert response.status_code == 200, response.text

        threads = [
            threading.Thread(target=search, args=(replica, k * 10 + n))
            for k, replica in enumerate(replicas)
            for n in range(SEARCHES_PER_REPLICA)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for replica in replicas:
            replica.stop()
    arrived = sorted(
        r.at for r in brave.requests if r.path == SEARCH_PATH and tag in r.params.get("q", "")
    )
    assert len(arrived) == 2 * SEARCHES_PER_REPLICA
    gaps = [later - earlier for earlier, later in zip(arrived, arrived[1:], strict=False)]
    assert min(gaps) >= 1.0, gaps


ELSEWHERE = "replica-b.example:4242:0a0b"
"""A replica on another machine: only its expiry frees the turn it holds."""


@pytest.fixture
def storage(tmp_path: Path, database_url: str) -> Iterator[Storage]:
    kept = Storage(tmp_path, database_url=database_url)
    kept.open()
    yield kept
    kept.close()


def held_by_a_dead_replica(storage: Storage, seconds: float) -> None:
    """The row a replica killed mid-search leaves: its turn, expiring `seconds` from now by
    the database's clock."""
    database = storage.database
    with database.write():
        database.db.execute(
            f"UPDATE search_turn SET owner = ?, expires = {database.dialect.clock} + ?",
            (ELSEWHERE, seconds),
        )


def test_a_turn_held_by_a_dead_replica_is_taken_over_after_its_expiry(storage):
    held_by_a_dead_replica(storage, 2.0)

    async def scenario() -> tuple[float, float, float]:
        governor = Governor(lambda: 1.0, store=storage)
        told = await governor.shared_wait()  # the dead replica's search counts as ahead
        async with governor.slot() as waited:
            pass
        async with governor.slot() as again:  # the turn is this replica's now
            pass
        return told, waited, again

    told, waited, again = asyncio.run(scenario())
    assert told == pytest.approx(1.0, abs=0.1)
    assert 1.8 <= waited < 10  # not before its expiry, nor the lease's 30 s
    assert 0.8 <= again < 1.5  # only the plan's pause after the search before


def test_a_turn_left_with_an_old_expiry_is_taken_at_once(storage):
    held_by_a_dead_replica(storage, -60.0)

    async def scenario() -> float:
        async with Governor(lambda: 1.0, store=storage).slot() as waited:
            return waited

    assert asyncio.run(scenario()) < 0.5


async def search(
    governor: Governor, started: list[float] | None = None, *, lasting: float = 0.0
) -> None:
    """A search's turn, `lasting` seconds at SearXNG (what it asks is not the point),
    noting when it began."""
    async with governor.slot():
        if started is not None:
            started.append(asyncio.get_running_loop().time())
        await asyncio.sleep(lasting)


def test_a_replica_waiting_for_anothers_search_is_told_so_and_served_after_it(storage):
    # Two governors on one database: two replicas. The second asks while the first
    # searches; it is told the wait, and starts a whole interval after the first ended.
    async def scenario() -> tuple[float, float, float]:
        first = Governor(lambda: 2.0, store=storage)
        second = Governor(lambda: 2.0, store=storage)
        started: list[float] = []
        async with first.slot():
            told = await second.shared_wait()
            queued = asyncio.ensure_future(search(second, started))
            await asyncio.sleep(0.5)
            ended = asyncio.get_running_loop().time()
        await queued
        return told, ended, started[0]

    told, ended, started = asyncio.run(scenario())
    assert told == pytest.approx(0.5, abs=0.1)  # the first's search, at 2 a second
    assert started - ended >= 0.45


def test_a_search_stopped_while_waiting_for_another_replica_leaves_the_line(storage):
    async def scenario() -> float:
        first = Governor(lambda: 2.0, store=storage)
        stopped = Governor(lambda: 2.0, store=storage)
        third = Governor(lambda: 2.0, store=storage)
        async with first.slot():
            waiting = asyncio.ensure_future(search(stopped))
            await asyncio.sleep(0.3)  # in line, before the third
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
        async with third.slot() as waited:
            return waited

    assert asyncio.run(scenario()) < 1.0  # not kept behind the stopped one for its expiry


def test_a_search_failed_or_stopped_ends_the_shared_turn_all_the_same(storage):
    async def scenario() -> tuple[float, float]:
        failing = Governor(lambda: 2.0, store=storage)
        stopped = Governor(lambda: 2.0, store=storage)
        after = Governor(lambda: 2.0, store=storage)
        with contextlib.suppress(RuntimeError):
            async with failing.slot():
                raise RuntimeError("SearXNG did not answer")
        async with after.slot() as first:
            pass
        running = asyncio.ensure_future(search(stopped, lasting=60))
        await asyncio.sleep(0.8)  # its search runs
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        async with after.slot() as second:
            pass
        return first, second

    first, second = asyncio.run(scenario())
    assert first < 1.0 and second < 1.0  # the plan's pause, not the turn's 30 s expiry


def test_a_search_goes_on_paced_locally_when_the_database_does_not_answer(
    tmp_path, own_postgres, caplog
):
    storage = Storage(tmp_path, database_url=own_postgres.create("chat"))
    storage.open()
    own_postgres.stop()

    async def scenario() -> float:
        governor = Governor(lambda: 1.0, store=storage)
        async with governor.slot() as waited:
            pass
        assert governor.expected_wait() >= 0.9  # the plan's pause, kept by this process
        return waited

    try:
        with caplog.at_level(logging.WARNING, logger="app.search.governor"):
            waited = asyncio.run(scenario())
    finally:
        storage.close()
    assert waited < 30  # not hung: the pool's wait, then on without the database
    assert "the database does not answer" in caplog.text
