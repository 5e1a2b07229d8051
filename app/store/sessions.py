"""The page's sign-in sessions, kept in the database so that signing out ends one for
every replica at once (docs/security.md). A row holds a digest of the cookie, never the
cookie itself, when it expires (Unix seconds) and, in household mode, whose it is.

Household mode's personal API tokens are here too (docs/household.md): a row holds a
SHA-256 digest of the token, never the token, whose it is, its label, and when it was made
and last used. `reset_access` ends both of one person's at once."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.store.connection import Connection
from app.store.rows import now
from app.store.users import LINK, USERS_COLUMNS, User, user_of

MAX_COOKIE_CHARS = 200
"""Longer than any cookie, token or link we make: a longer one is not ours."""
LINK_SECONDS = 24 * 3600
"""How long a one-time sign-in link works."""
LAST_USED_STEP = timedelta(minutes=1)
"""A token's or a session's "last used" is written at most this often: not a write on
every request."""


@dataclass(frozen=True)
class SignInLink:
    """A new one-time sign-in link, for Database.add_sign_in_link."""

    path: str
    """The page's address after the service's own origin (``/#welcome=...``)."""
    key: str
    """What the database keeps: the digest of its token."""
    expires: float
    """Unix seconds."""


class CookieDigest:
    """What the database keeps of a session cookie or a sign-in link's token: its HMAC
    under a key derived from AUTH_TOKEN, so that a copy of the database opens no session
    and changing the token signs everyone out. The service and `users link` derive the
    same from the same setting."""

    def __init__(self, token: str) -> None:
        self.key = hmac.new(token.encode(), b"session cookie", hashlib.sha256).digest()

    def of(self, cookie: str) -> str | None:
        """None for a cookie we cannot have made (a cookie is whatever the client sends:
        non-ASCII text must not crash us)."""
        if not (cookie.isascii() and 0 < len(cookie) <= MAX_COOKIE_CHARS):
            return None
        return hmac.new(self.key, cookie.encode(), hashlib.sha256).hexdigest()

    def new_link(self) -> SignInLink:
        """256 random bits, valid LINK_SECONDS from now."""
        token = secrets.token_urlsafe(32)
        key = self.of(token)
        assert key is not None
        return SignInLink(f"/#welcome={token}", key, time.time() + LINK_SECONDS)


@dataclass(frozen=True)
class PersonSession:
    """One of a person's live sessions, as their account lists it."""

    id: str
    """A digest of the stored key: names the session without being it."""
    key: str
    expires: float
    last_used: str | None


@dataclass(frozen=True)
class ApiToken:
    """A personal API token as listed: never the token itself."""

    id: str
    label: str
    created: str
    last_used: str | None


@dataclass(frozen=True)
class AccessReset:
    """What `reset_access` ended."""

    sessions: int
    tokens: int


def session_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def used_now(last_used: str | None) -> str | None:
    """The "last used" to write now (ISO 8601, UTC), or None when `last_used` is recent
    enough (within LAST_USED_STEP)."""
    now = datetime.now(UTC)
    if last_used is None or datetime.fromisoformat(last_used) < now - LAST_USED_STEP:
        return now.isoformat(timespec="seconds")
    return None


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
        any other (expired, unknown, a token's session, a disabled person's). Its "last
        used" brought up to date when older than LAST_USED_STEP."""
        found = self.db.execute(
            f"SELECT {USERS_COLUMNS}, sessions.last_used FROM sessions "
            "JOIN users ON users.rowid = sessions.person "
            "WHERE sessions.key = ? AND sessions.expires > ? AND users.disabled = 0",
            (key, time.time()),
        ).fetchone()
        return self.used_by(found, "sessions", key)

    def end_session(self, key: str) -> None:
        with self.write():
            self.db.execute("DELETE FROM sessions WHERE key = ?", (key,))

    def person_sessions(self, person: int) -> list[PersonSession]:
        """A person's live sessions, the newest first (not a sign-in link of theirs, kept
        in the same table)."""
        rows = self.db.execute(
            "SELECT key, expires, last_used FROM sessions WHERE person = ? AND expires > ? "
            "AND key NOT LIKE ? ORDER BY expires DESC",
            (person, time.time(), LINK + "%"),
        ).fetchall()
        return [
            PersonSession(session_id(key), key, float(expires), last_used)
            for key, expires, last_used in rows
        ]

    def end_person_session(self, person: int, session: str) -> bool:
        """Ends that session of the person's (by its id); whether there was one."""
        for live in self.person_sessions(person):
            if live.id == session:
                self.end_session(live.key)
                return True
        return False

    def end_other_sessions(self, person: int, kept: str) -> int:
        """Ends every session of the person's but the one whose key is `kept`: how many."""
        with self.write():
            return int(
                self.db.execute(
                    "DELETE FROM sessions WHERE person = ? AND key <> ?", (person, kept)
                ).rowcount
            )

    # -- personal API tokens ---------------------------------------------------------------

    def add_token(self, key: str, token_id: str, person: int, label: str) -> ApiToken:
        with self.write():
            created = now()
            self.db.execute(
                "INSERT INTO api_tokens (key, id, person, label, created) VALUES (?, ?, ?, ?, ?)",
                (key, token_id, person, label, created),
            )
        return ApiToken(token_id, label, created, None)

    def person_tokens(self, person: int) -> list[ApiToken]:
        """A person's tokens, the newest first."""
        rows = self.db.execute(
            "SELECT id, label, created, last_used FROM api_tokens WHERE person = ? "
            "ORDER BY created DESC",
            (person,),
        ).fetchall()
        return [ApiToken(*row) for row in rows]

    def revoke_token(self, person: int, token_id: str) -> bool:
        """Revokes that token of the person's; whether there was one."""
        with self.write():
            return (
                self.db.execute(
                    "DELETE FROM api_tokens WHERE person = ? AND id = ?", (person, token_id)
                ).rowcount
                == 1
            )

    def token_owner(self, key: str) -> User | None:
        """Whose token that digest is, disabled or not (None: revoked, never made, or its
        person removed); its "last used" brought up to date when older than LAST_USED_STEP."""
        found = self.db.execute(
            f"SELECT {USERS_COLUMNS}, api_tokens.last_used FROM api_tokens "
            "JOIN users ON users.rowid = api_tokens.person WHERE api_tokens.key = ?",
            (key,),
        ).fetchone()
        return self.used_by(found, "api_tokens", key)

    def used_by(self, found: tuple[Any, ...] | None, table: str, key: str) -> User | None:
        """The person of a row found with its "last used" last (sessions or api_tokens),
        that "last used" written when older than LAST_USED_STEP."""
        if found is None:
            return None
        *person, last_used = found
        if (now := used_now(last_used)) is not None:
            with self.write():
                self.db.execute(f"UPDATE {table} SET last_used = ? WHERE key = ?", (now, key))
        return user_of(person)

    def reset_access(self, person: int) -> AccessReset:
        """Ends every session of the person's (and a sign-in link not used yet) and revokes
        every token of theirs, at once: signing out everywhere, and the admin's reset. One
        function for all of it, so that a new way in is revoked here too."""
        with self.write():
            sessions = self.db.execute("DELETE FROM sessions WHERE person = ?", (person,))
            tokens = self.db.execute("DELETE FROM api_tokens WHERE person = ?", (person,))
            return AccessReset(int(sessions.rowcount), int(tokens.rowcount))
