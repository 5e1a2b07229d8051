"""A turn holds its conversation through a lease row (owner, expiry, renewed while it
runs): a second turn, a rewind or a delete meanwhile is refused, from any process sharing
the database (DATA_DIR's, or one PostgreSQL for several machines). A lease whose owner
died (a crash) or expired, by the database's clock, is taken over (docs/architecture.md).
"""

from __future__ import annotations

import os
import secrets
import socket

from app.store.connection import Connection
from app.store.errors import Busy

LEASE_SECONDS = 30.0
"""A crashed owner on another host holds a conversation at most this long."""


def new_owner() -> str:
    """A lease owner: this host and process (so a dead owner is recognised at once) and a
    random part (so two turns of one process are told apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"


def owner_alive(owner: str) -> bool:
    """False only when the owner certainly died: a process of this host that is gone."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Leases(Connection):
    """The lease queries. Expiry is by the database's clock (`self.dialect.clock`), never
    this machine's: replicas whose clocks disagree still agree on who holds a lease."""

    def take(self, conversation_id: str, owner: str, *, again: bool = False) -> bool:
        """In the caller's write transaction: the conversation's lease for `owner` when it
        is free or expired (with `again`, also when `owner` holds it still); whether it
        was taken. A dead local owner's lease is dropped first."""
        self.drop_dead_leases(conversation_id)
        taken = self.db.execute(
            "INSERT INTO leases (conversation, owner, expires) "
            f"VALUES (?, ?, {self.dialect.clock} + ?) "
            "ON CONFLICT (conversation) DO UPDATE SET owner = excluded.owner, "
            f"expires = excluded.expires WHERE leases.expires < {self.dialect.clock}"
            + (" OR leases.owner = excluded.owner" if again else ""),
            (conversation_id, owner, LEASE_SECONDS),
        )
        return taken.rowcount == 1

    def renew(self, conversation_id: str, owner: str) -> bool:
        with self.write():
            renewed = self.db.execute(
                f"UPDATE leases SET expires = {self.dialect.clock} + ? "
                "WHERE conversation = ? AND owner = ?",
                (LEASE_SECONDS, conversation_id, owner),
            )
            return renewed.rowcount == 1

    def release(self, conversation_id: str, owner: str) -> None:
        with self.write():
            self.drop_lease(conversation_id, owner)

    def drop_lease(self, conversation_id: str, owner: str) -> None:
        """Only its owner releases a lease: a late release from an old turn is a no-op."""
        self.db.execute(
            "DELETE FROM leases WHERE conversation = ? AND owner = ?", (conversation_id, owner)
        )

    def drop_dead_leases(self, conversation_id: str | None = None) -> None:
        """In the caller's write transaction: the leases (of one conversation, or all) whose
        owner certainly died, a process of this host that is gone, go at once rather than
        at their expiry. Checked here, in Python, on both backends (PostgreSQL has no SQL
        function of ours); the write lock makes the check and what follows one step."""
        if conversation_id is None:
            rows = self.db.execute("SELECT conversation, owner FROM leases").fetchall()
        else:
            rows = self.db.execute(
                "SELECT conversation, owner FROM leases WHERE conversation = ?",
                (conversation_id,),
            ).fetchall()
        for conversation, owner in rows:
            if not owner_alive(owner):
                self.drop_lease(conversation, owner)

    def held(self, conversation_id: str) -> bool:
        row = self.db.execute(
            f"SELECT owner FROM leases WHERE conversation = ? AND expires >= {self.dialect.clock}",
            (conversation_id,),
        ).fetchone()
        return row is not None and owner_alive(row[0])

    def refuse_if_held(self, conversation_id: str, what: str) -> None:
        if self.held(conversation_id):
            raise Busy(f"a turn is running in this conversation; stop it first, then {what}")
