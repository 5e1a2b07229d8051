"""The governor: every search of the service, in every conversation, the lab and the
commands, waits its turn so that together they keep to the search plan's rate (Brave's
free plan: 1 query a second). A search beyond the rate queues instead of failing; how long
it waited goes to the trail (docs/search-spend.md).

The service's governor shares its turn through the database (a PaceStore: app.store's
Storage), so that every replica of one database, behind a proxy or on one DATA_DIR, keeps
to the one plan's rate together; the commands' is local to their process."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Protocol

logger = logging.getLogger(__name__)

MIN_RATE = 0.01
"""Searches a second at the slowest, whatever the plan says (one every 100 s)."""
HOLD_SECONDS = 30.0
"""A replica that died holding the shared turn keeps it at most this long (by the
database's clock), as a turn's lease: longer than a search lasts (SEARXNG_TIMEOUT, 20 s)."""
POLL_SECONDS = 0.15
"""How often a replica waiting for the shared turn held by another asks again."""


class NothingSent(Exception):
    """Raised in a search's turn before anything was sent (a person's share spent): the
    turn ends without the pause a search's queries call for."""


class PaceStore(Protocol):
    """Where the replicas of one database share the search plan's turn (app.store's
    Storage); times are the database's, owners opaque."""

    async def take_search_turn(self, owner: str, hold: float) -> tuple[bool, float, int]:
        """Take the turn for at most `hold` seconds if it is free, its pause over and no
        other waiter asked first; else wait in line. Whether it was taken, the seconds of
        pause left, and the other replicas' searches ahead (holding or waiting)."""
        ...

    async def end_search_turn(self, owner: str, pause: float) -> None:
        """Leave the line; free the turn if `owner` holds it, the next search to start
        `pause` seconds from now."""
        ...

    async def search_pace(self, owner: str) -> tuple[float, int]:
        """The seconds of pause left and the other replicas' searches ahead."""
        ...


class Governor:
    """One search at a time, each starting at least ``1 / rate()`` seconds after the one
    before it ended (``2 / rate()`` after one that sent Brave two queries), in the order
    they asked; with a `store`, across every replica of its database.

    Counted from the end, not the start: when SearXNG forwards a search to Brave is known
    only to be between our request and its answer (a first search, or a new connection,
    can take a fifth of a second longer there), so only this spacing keeps any two
    queries a whole second apart at Brave. ``rate`` is read at every search: the plan's
    rate as Brave's latest answer told it, or SEARCH_RATE.

    The process's own lock comes first: its searches queue here, and only the first of them
    asks the store for the shared turn. When the database does not answer, that search is
    paced by this process alone (logged) rather than kept waiting."""

    def __init__(
        self,
        rate: Callable[[], float],
        *,
        clock: Callable[[], float] = time.monotonic,
        store: PaceStore | None = None,
    ) -> None:
        self.rate = rate
        self.clock = clock
        self.store = store
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"
        """This replica in the store (the format of a lease's owner: a dead process of this
        host is recognised at once)."""
        self.lock = asyncio.Lock()  # first come, first served
        self.next_at = float("-inf")
        """When the next search may start, as far as this process knows."""
        self.queued = 0
        """Turns held or waited for: one for each Brave query of those searches."""
        self.others = 0
        """Other replicas' searches ahead, as the store last said."""

    def interval(self) -> float:
        return 1 / max(self.rate(), MIN_RATE)

    def expected_wait(self) -> float:
        """About how long a search asking now would wait for its turn, for the trail to
        say while it waits: what is left of the pause after the last search, and one
        interval for each turn ahead of it (a search of two queries is two; the other
        replicas' searches one each; their own time at Brave not counted)."""
        left = max(0.0, self.next_at - self.clock())
        return left + (self.queued + self.others) * self.interval()

    async def shared_wait(self) -> float:
        """`expected_wait`, the other replicas' searches and pause read from the store."""
        if self.store is not None:
            try:
                pause, others = await self.store.search_pace(self.owner)
            except ConnectionError as exc:
                logger.warning("search pace unknown, the database does not answer: %s", exc)
            else:
                self.noted(pause, others)
        return self.expected_wait()

    def noted(self, pause: float, others: int) -> None:
        self.next_at = max(self.next_at, self.clock() + pause)
        self.others = others

    @asynccontextmanager
    async def slot(self, queries: int = 1) -> AsyncIterator[float]:
        """Hold the search's turn while it runs; gives the seconds it waited for it. A
        search cancelled (Stop) or failed ends its turn all the same. A search that sends
        Brave several queries (both of our engines) is as many turns: the next search
        starts ``queries / rate()`` seconds after it ended; one that sends none (other
        engines only) is still one, SearXNG's engines being paced the same. One refused
        before it was sent (NothingSent) leaves no pause."""
        asked = self.clock()
        turns = max(1, queries)
        self.queued += turns
        try:
            async with self.lock:
                if (wait := self.next_at - self.clock()) > 0:
                    await asyncio.sleep(wait)
                shared = await self.take()
                sent = True
                try:
                    yield self.clock() - asked
                except NothingSent:
                    sent = False
                    raise
                finally:
                    pause = turns * self.interval() if sent else 0.0
                    self.next_at = self.clock() + pause
                    if shared:
                        await self.end(pause)
        finally:
            self.queued -= turns

    async def take(self) -> bool:
        """The shared turn, waited for; False without a store, or when the database does
        not answer (this search is then paced by this process alone)."""
        if self.store is None:
            return False
        try:
            while True:
                taken, pause, others = await self.store.take_search_turn(self.owner, HOLD_SECONDS)
                self.noted(pause, others)
                if taken:
                    return True
                await asyncio.sleep(pause or POLL_SECONDS)
        except ConnectionError as exc:
            logger.warning(
                "the database does not answer (%s): this search keeps to the plan's rate "
                "for this replica only",
                exc,
            )
            return False
        except BaseException:  # cancelled (Stop) while waiting: out of the line
            await self.end(0.0)
            raise

    async def end(self, pause: float) -> None:
        assert self.store is not None
        try:
            await self.store.end_search_turn(self.owner, pause)
        except ConnectionError as exc:
            logger.warning("the search's turn could not be ended in the database: %s", exc)
