"""The page's sign-in sessions, kept in the database so that signing out ends one for
every replica at once (docs/security.md). A row holds a digest of the cookie, never the
cookie itself, and when it expires (Unix seconds)."""

from __future__ import annotations

import time

from app.store.connection import Connection


class SessionRows(Connection):
    """The sessions' queries; each write its own transaction."""

    def add_session(self, key: str, expires: float) -> None:
        """A new session; the expired ones go at the same time, so the table stays small."""
        with self.write():
            self.db.execute("DELETE FROM sessions WHERE expires <= ?", (time.time(),))
            self.db.execute("INSERT INTO sessions (key, expires) VALUES (?, ?)", (key, expires))

    def session_live(self, key: str) -> bool:
        """Whether that session exists and has not expired."""
        expires = self.scalar("SELECT expires FROM sessions WHERE key = ?", (key,))
        return expires is not None and float(expires) > time.time()

    def end_session(self, key: str) -> None:
        with self.write():
            self.db.execute("DELETE FROM sessions WHERE key = ?", (key,))
