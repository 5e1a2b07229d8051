"""A turn's events kept in the database while it runs and a reconnection window after it
(tables turn_runs, turn_events), so that a client that reconnects, to any replica, gets
what it missed (app/chat/runs.py numbers and coalesces them; docs/architecture.md,
"Detached turns").

A row holds the events with ids in (first, last]: one event, or a run of an answer's text
coalesced (an id counts the text's characters, so any id inside the run is a place in its
text). turn_runs holds one row per conversation: the turn's owner (its lease's), a Stop
asked from any replica, a research plan's wait and the Start given to it from any replica,
and when it ended. Once the window after its end has passed, only
a turn's last event (its end) is kept: what a client asking about a finished turn gets.
"""

from __future__ import annotations

from typing import NamedTuple

from app import jsoncodec
from app.store.leases import Leases, owner_alive
from app.store.nul import json_text

WINDOW_SECONDS = 120.0
"""How long a turn's events are kept after it ended, for a client reconnecting late."""


class KeptRow(NamedTuple):
    first: int
    last: int
    event: str
    """JSON."""


class Asked(NamedTuple):
    """What was asked of a running turn through the database, from any replica."""

    stop: bool
    """Stop (or another turn took the conversation: this one has nothing more to keep)."""
    plan: list[str] | None
    """The sub-questions a Start gave the plan the turn waits on."""


NOTHING_ASKED = Asked(False, None)
GONE = Asked(True, None)
"""Another turn took the conversation: this one stops, with nothing more to keep."""


class KeptEvents(NamedTuple):
    """A turn's kept rows after an id, and where the turn stands."""

    rows: list[KeptRow]
    owner: str | None
    """The turn's owner; None when no turn ever ran in the conversation."""
    ended: bool
    holds: bool
    """Its owner holds the conversation's lease: it is running, or just ending."""


class TurnEventRows(Leases):
    """The kept events' queries; each write its own transaction."""

    def open_run(self, conversation_id: str, owner: str) -> None:
        """A new turn of the conversation: the last one's events go, and those of turns
        whose window has passed but for their end."""
        with self.write():
            self.drop_old_events()
            self.db.execute("DELETE FROM turn_events WHERE conversation = ?", (conversation_id,))
            self.db.execute(
                "INSERT INTO turn_runs (conversation, owner, stop, ended, plan_waits, plan) "
                "VALUES (?, ?, 0, NULL, 0, NULL) "
                "ON CONFLICT (conversation) DO UPDATE SET owner = excluded.owner, stop = 0, "
                "ended = NULL, plan_waits = 0, plan = NULL",
                (conversation_id, owner),
            )

    def drop_old_events(self) -> None:
        ended = f"SELECT conversation FROM turn_runs WHERE ended < {self.dialect.clock} - ?"
        self.db.execute(
            f"DELETE FROM turn_events WHERE conversation IN ({ended}) AND last < "
            "(SELECT max(kept.last) FROM turn_events kept "
            "WHERE kept.conversation = turn_events.conversation)",
            (WINDOW_SECONDS,),
        )
        self.db.execute(
            "DELETE FROM turn_events WHERE conversation NOT IN (SELECT id FROM conversations)"
        )
        self.db.execute(
            "DELETE FROM turn_runs WHERE conversation NOT IN (SELECT id FROM conversations)"
        )

    def keep_events(
        self, conversation_id: str, owner: str, rows: list[KeptRow], *, ended: bool
    ) -> Asked:
        """Each row in place of those it covers (a run of text's pieces, coalesced), and
        the turn marked ended if it is; what was asked of it."""
        with self.write():
            asked = self.asked_of(conversation_id, owner)
            if asked is None:
                return GONE
            for row in rows:
                self.db.execute(
                    "DELETE FROM turn_events WHERE conversation = ? AND first >= ? AND last <= ?",
                    (conversation_id, row.first, row.last),
                )
                self.db.execute(
                    "INSERT INTO turn_events (conversation, first, last, event) "
                    "VALUES (?, ?, ?, ?)",
                    (conversation_id, *row),
                )
            if ended:
                self.db.execute(
                    f"UPDATE turn_runs SET ended = {self.dialect.clock} WHERE conversation = ?",
                    (conversation_id,),
                )
            return asked

    def asked(self, conversation_id: str, owner: str) -> Asked:
        """What was asked of the owner's turn: a Stop (or it is no longer the turn), its
        plan's Start."""
        return self.asked_of(conversation_id, owner) or GONE

    def asked_of(self, conversation_id: str, owner: str) -> Asked | None:
        """What was asked of the owner's turn; None when it is no longer the turn."""
        run = self.db.execute(
            "SELECT stop, plan_waits, plan FROM turn_runs WHERE conversation = ? AND owner = ?",
            (conversation_id, owner),
        ).fetchone()
        if run is None:
            return None
        stop, waits, plan = run
        given = jsoncodec.loads(plan) if waits and plan is not None else None
        return Asked(bool(stop), given)

    def plan_waits(self, conversation_id: str, owner: str) -> None:
        """The owner's turn waits on its plan: a Start may come through any replica."""
        with self.write():
            self.db.execute(
                "UPDATE turn_runs SET plan_waits = 1, plan = NULL "
                "WHERE conversation = ? AND owner = ?",
                (conversation_id, owner),
            )

    def plan_waited(self, conversation_id: str, owner: str) -> list[str] | None:
        """The plan waits no more (one statement: a Start that comes after it is refused,
        one that came before is returned); the sub-questions a Start gave, if one came."""
        with self.write():
            plans = self.db.execute(
                "UPDATE turn_runs SET plan_waits = 0 WHERE conversation = ? AND owner = ? "
                "RETURNING plan",
                (conversation_id, owner),
            ).fetchall()
        plan = plans[0][0] if plans else None
        return jsoncodec.loads(plan) if plan is not None else None

    def start_plan(self, conversation_id: str, questions: list[str]) -> bool:
        """A Start for the plan the conversation's running turn waits on, whichever replica
        runs it (it reads it within a tick); whether a plan was waiting, with no Start yet."""
        self.row(conversation_id)  # NotFound for a conversation that is not there
        with self.write():
            given = self.db.execute(
                "UPDATE turn_runs SET plan = ? WHERE conversation = ? AND ended IS NULL "
                "AND plan_waits = 1 AND plan IS NULL",
                (json_text(questions), conversation_id),
            )
            return given.rowcount == 1 and self.held(conversation_id)

    def ask_stop(self, conversation_id: str) -> bool:
        """A Stop for the conversation's running turn, whichever replica runs it; whether
        one was running."""
        self.row(conversation_id)  # NotFound for a conversation that is not there
        with self.write():
            asked = self.db.execute(
                "UPDATE turn_runs SET stop = 1 WHERE conversation = ? AND ended IS NULL",
                (conversation_id,),
            )
            return asked.rowcount == 1 and self.held(conversation_id)

    def turn_events(self, conversation_id: str, after: int) -> KeptEvents:
        self.row(conversation_id)
        run = self.db.execute(
            "SELECT owner, ended FROM turn_runs WHERE conversation = ?", (conversation_id,)
        ).fetchone()
        if run is None:
            return KeptEvents([], None, True, False)
        rows = self.db.execute(
            "SELECT first, last, event FROM turn_events WHERE conversation = ? AND last > ? "
            "ORDER BY first",
            (conversation_id, after),
        ).fetchall()
        holder = self.scalar(
            f"SELECT owner FROM leases WHERE conversation = ? AND expires >= {self.dialect.clock}",
            (conversation_id,),
        )
        owner, ended = run
        holds = holder == owner and owner_alive(owner)
        return KeptEvents([KeptRow(*row) for row in rows], owner, ended is not None, holds)
