"""The page's sign-in sessions, kept in the database so that signing out ends one for
every replica at once (docs/security.md). A row holds a digest of the cookie, never the
cookie itself, when it expires (Unix seconds) and, in household mode, whose it is."""

from __future__ import annotations

import time

from app.store.connection import Connection
from app.store.users import USERS_COLUMNS, User, user_of


class SessionRows(Connection):
    """The sessions' queries; each write its own transaction."""

    def add_session(self, key: str, expires: float, person: int | None = None) -> None:
        """A new session (a person's in household mode, users.rowid); the expired ones go
        at the same time, so the table stays small."""
        with self.write():
            self.db.execute("DELETE FROM sessions WHERE expires <= ?", (time.time(),))
            self.db.execute(
                "INSERT INTO sessions (key, expires, person) VALUES (?, ?, ?)",
                (key, expires, person),
            )

    def session_live(self, key: str) -> bool:
        """Whether that session exists and has not expired."""
        expires = self.scalar("SELECT expires FROM sessions WHERE key = ?", (key,))
        return expires is not None and float(expires) > time.time()

    def session_user(self, key: str) -> User | None:
        """The person of that session while it lives and they are not disabled; None for
        any other (expired, unknown, a token's session, a disabled person's)."""
        found = self.db.execute(
            f"SELECT {USERS_COLUMNS} FROM sessions JOIN users ON users.rowid = sessions.person "
            "WHERE sessions.key = ? AND sessions.expires > ? AND users.disabled = 0",
            (key, time.time()),
        ).fetchone()
        return None if found is None else user_of(found)

    def end_session(self, key: str) -> None:
        with self.write():
            self.db.execute("DELETE FROM sessions WHERE key = ?", (key,))
