"""The search plan's turn, shared by every replica of one database (tables search_turn and
search_waiters): one search at a time across all of them, each starting at least a pause
after the one before it ended, by the database's clock, the replicas waiting served in the
order they asked. What a search or a rate is stays app.search's business (the Governor of
app/search/governor.py, whose PaceStore this is); here are only owners and seconds.

A turn whose holder died (a replica killed mid-search) is taken over once its expiry has
passed, or at once when the holder was a process of this host that is gone (as the leases,
app/store/leases.py); a waiter that stopped asking is dropped after its own expiry.
"""

from __future__ import annotations

from typing import NamedTuple

from app.store.connection import Connection
from app.store.leases import owner_alive

WAITER_SECONDS = 5.0
"""A waiter that has not asked again for this long past the pause it was told to sleep is
gone (cancelled without a word, or dead): it no longer keeps the others waiting."""


class SearchTurn(NamedTuple):
    """What asking for the turn gave."""

    taken: bool
    pause: float
    """Seconds until the pause after the last search ends (0 when it has)."""
    others: int
    """Other replicas' searches ahead: the one holding the turn and those waiting."""


class SearchPace(NamedTuple):
    pause: float
    others: int


class SearchPaceRows(Connection):
    """The turn's queries; the asking and the ending each its own write transaction."""

    def take_search_turn(self, owner: str, hold: float) -> SearchTurn:
        """Take the turn for `owner` for at most `hold` seconds, when nobody holds it, the
        pause is over and no live waiter asked before; else `owner` waits in line."""
        with self.write():
            now, holder, pause = self.turn_now()
            if holder == owner:
                holder = None  # its end was not written (the database did not answer)
            self.db.execute(
                "INSERT INTO search_waiters (owner, asked, expires) VALUES (?, ?, ?) "
                "ON CONFLICT (owner) DO UPDATE SET expires = excluded.expires",
                (owner, now, now + pause + WAITER_SECONDS),
            )
            waiters = self.live_waiters(now)
            others = sum(1 for waiter in waiters if waiter != owner) + (holder is not None)
            if holder is not None or pause > 0 or waiters[0] != owner:
                return SearchTurn(False, pause, others)
            self.db.execute(
                "UPDATE search_turn SET owner = ?, expires = ? WHERE id = 1", (owner, now + hold)
            )
            self.db.execute("DELETE FROM search_waiters WHERE owner = ?", (owner,))
            return SearchTurn(True, 0.0, others)

    def end_search_turn(self, owner: str, pause: float) -> None:
        """`owner` leaves the line; the turn, if it still holds it, is free again and the
        next search may start `pause` seconds from now."""
        with self.write():
            self.db.execute("DELETE FROM search_waiters WHERE owner = ?", (owner,))
            self.db.execute(
                f"UPDATE search_turn SET owner = NULL, next_at = {self.dialect.clock} + ? "
                "WHERE id = 1 AND owner = ?",
                (pause, owner),
            )

    def search_pace(self, owner: str) -> SearchPace:
        """For the wait a search asking now expects: the pause left, and the others'
        searches ahead of `owner`'s."""
        now, holder, pause = self.turn_now()
        waiting = self.scalar(
            "SELECT count(*) FROM search_waiters WHERE expires >= ? AND owner <> ?", (now, owner)
        )
        return SearchPace(pause, int(waiting) + (holder is not None and holder != owner))

    def turn_now(self) -> tuple[float, str | None, float]:
        """The database's time now, the turn's live holder (None: free, expired, or its
        process gone), and the seconds of pause left."""
        now, holder, expires, next_at = self.db.execute(
            f"SELECT {self.dialect.clock}, owner, expires, next_at FROM search_turn WHERE id = 1"
        ).fetchone()
        if holder is not None and (expires < now or not owner_alive(holder)):
            holder = None
        return float(now), holder, max(0.0, float(next_at) - float(now))

    def live_waiters(self, now: float) -> list[str]:
        """In the caller's write transaction: the waiters in the order they asked, those
        expired or dead dropped."""
        self.db.execute("DELETE FROM search_waiters WHERE expires < ?", (now,))
        waiters = [
            owner
            for (owner,) in self.db.execute(
                "SELECT owner FROM search_waiters ORDER BY asked, owner"
            ).fetchall()
        ]
        for owner in [waiter for waiter in waiters if not owner_alive(waiter)]:
            self.db.execute("DELETE FROM search_waiters WHERE owner = ?", (owner,))
            waiters.remove(owner)
        return waiters
