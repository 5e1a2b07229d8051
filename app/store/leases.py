"""A turn holds its conversation through a lease row (owner, expiry, renewed while it
runs): a second turn, a rewind or a delete meanwhile is refused, from any process sharing
DATA_DIR. A lease whose owner died (a crash) or expired is taken over (docs/architecture.md).
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from pathlib import Path

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
    """The lease queries; SQL's owner_alive() for the queries built on them."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.db.create_function("owner_alive", 1, owner_alive, deterministic=False)

    def renew(self, conversation_id: str, owner: str) -> bool:
        with self.write():
            renewed = self.db.execute(
                "UPDATE leases SET expires = ? WHERE conversation = ? AND owner = ?",
                (time.time() + LEASE_SECONDS, conversation_id, owner),
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

    def held(self, conversation_id: str) -> bool:
        row = self.db.execute(
            "SELECT 1 FROM leases WHERE conversation = ? AND expires >= ? AND owner_alive(owner)",
            (conversation_id, time.time()),
        ).fetchone()
        return row is not None

    def refuse_if_held(self, conversation_id: str, what: str) -> None:
        if self.held(conversation_id):
            raise Busy(f"a turn is running in this conversation; stop it first, then {what}")
