"""The household: one row a person (docs/household.md). A name is unique and is how the
person is known everywhere (the proxy's header, the sign-in form, the commands); the
password is kept only as its hash (passwords.py), and a person the proxy signs in has none.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.store.connection import Connection
from app.store.errors import Conflict, NotFound, Refused
from app.store.rows import now
from app.store.search_cache import OwnCache, forget_searches

LINK = "link:"
"""What starts a one-time sign-in link's key in the sessions table (a session's is hex)."""
MAX_NAME_CHARS = 256
"""A name, a display name or an email: as long as a proxy's header may be."""

USER_FIELDS = ("rowid", "name", "display_name", "email", "admin", "disabled", "created", "password")
USER_COLUMNS = ", ".join(USER_FIELDS)
USERS_COLUMNS = ", ".join(f"users.{field}" for field in USER_FIELDS)
"""The same, in a query that joins users to another table."""


@dataclass(frozen=True)
class User:
    id: int
    """Its rowid: what a conversation's owner and a session's person name."""
    name: str
    display_name: str | None
    email: str | None
    admin: bool
    disabled: bool
    created: str
    password: str | None
    """The Argon2id hash; None: no password (signs in through the proxy only)."""


@dataclass(frozen=True)
class NewUser:
    name: str
    display_name: str | None = None
    email: str | None = None
    admin: bool = False
    password: str | None = None
    """Its hash (passwords.hash_password), never the password."""


def checked_text(what: str, text: str) -> str:
    """`text` when it may be a name (or a display name, an email): 1 to MAX_NAME_CHARS
    characters, no control or format character (a newline, a NUL, a zero-width space that
    would make two names look alike), no space around it; else Refused, saying why."""
    if not text:
        raise Refused(f"the {what} is empty")
    if len(text) > MAX_NAME_CHARS:
        raise Refused(f"the {what} is longer than {MAX_NAME_CHARS} characters")
    if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in text):
        raise Refused(f"the {what} holds a control character or an unusual space")
    if text != text.strip():
        raise Refused(f"the {what} starts or ends with a space")
    return text


def user_of(row: Sequence[Any]) -> User:
    rowid, name, display_name, email, admin, disabled, created, password = row
    return User(rowid, name, display_name, email, bool(admin), bool(disabled), created, password)


class UserRows(Connection):
    """The household's queries; each write its own transaction."""

    def add_user(self, new: NewUser) -> User:
        """The new person; Refused for a name, display name or email the store does not
        keep, Conflict when the name is taken."""
        name = checked_text("name", new.name)
        for what, text in (("display name", new.display_name), ("email", new.email)):
            if text is not None:
                checked_text(what, text)
        with self.write():
            if self.user(name) is not None:
                raise Conflict(f"there is already a user named {name!r}")
            self.db.execute(
                "INSERT INTO users (name, display_name, email, admin, disabled, created, password) "
                "VALUES (?, ?, ?, ?, 0, ?, ?)",
                (name, new.display_name, new.email, int(new.admin), now(), new.password),
            )
        added = self.user(name)
        assert added is not None
        return added

    def user(self, name: str) -> User | None:
        found = self.db.execute(
            f"SELECT {USER_COLUMNS} FROM users WHERE name = ?", (name,)
        ).fetchone()
        return None if found is None else user_of(found)

    def users(self) -> list[User]:
        rows = self.db.execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY rowid")
        return [user_of(row) for row in rows]

    def user_count(self) -> int:
        return int(self.scalar("SELECT count(*) FROM users"))

    def change_person(
        self, person_id: int, *, disabled: bool | None = None, admin: bool | None = None
    ) -> User | None:
        """That person disabled or enabled, made an admin or no longer one, in one write;
        the person as they now are (None: no such person). Disabling ends their sessions
        too, so enabling them again revives none: they sign in anew. Conflict for the
        household's last admin, disabled or no longer an admin (no one could manage it any
        more)."""
        with self.write():
            if disabled or admin is False:
                self.keep_an_admin(person_id)
            if self.person(person_id) is None:
                return None
            if disabled is not None:
                self.db.execute(
                    "UPDATE users SET disabled = ? WHERE rowid = ?", (int(disabled), person_id)
                )
            if disabled:
                self.db.execute("DELETE FROM sessions WHERE person = ?", (person_id,))
            if admin is not None:
                self.db.execute(
                    "UPDATE users SET admin = ? WHERE rowid = ?", (int(admin), person_id)
                )
            return self.person(person_id)

    def keep_an_admin(self, person_id: int) -> None:
        """Conflict when that person is the household's last admin (enabled): removed or no
        longer an admin, they would leave no one to manage it. Within a write."""
        person = self.person(person_id)
        others = self.scalar(
            "SELECT count(*) FROM users WHERE admin = 1 AND disabled = 0 AND rowid <> ?",
            (person_id,),
        )
        if person is not None and person.admin and not others:
            raise Conflict(f"{person.name} is the household's last admin: add another admin first")

    def set_password(self, name: str, password: str) -> bool:
        """`password` (its hash) for that user; whether there is one."""
        with self.write():
            return (
                self.db.execute(
                    "UPDATE users SET password = ? WHERE name = ?", (password, name)
                ).rowcount
                == 1
            )

    def seen_user(self, name: str, display_name: str | None, email: str | None) -> User:
        """The person a proxy named, added (not an admin, no password) on first sight, with
        the display name and email it sent then; Refused for a name the store does not
        keep. The write lock makes two replicas seeing a new name at once add it once."""
        if (known := self.user(name)) is not None:
            return known
        with self.write():
            if self.user(name) is None:
                self.db.execute(
                    "INSERT INTO users (name, display_name, email, created) VALUES (?, ?, ?, ?)",
                    (checked_text("name", name), display_name, email, now()),
                )
        seen = self.user(name)
        assert seen is not None
        return seen

    def first_admin(self) -> User | None:
        found = self.db.execute(
            f"SELECT {USER_COLUMNS} FROM users WHERE admin = 1 ORDER BY rowid LIMIT 1"
        ).fetchone()
        return None if found is None else user_of(found)

    def adopt_conversations(self, owner: int) -> int:
        """The conversations of the single-user modes (no owner) given to `owner`: how many."""
        with self.write():
            return self.db.execute(
                "UPDATE conversations SET owner = ? WHERE owner IS NULL", (owner,)
            ).rowcount

    def person(self, person_id: int) -> User | None:
        """The person with that rowid (the admin routes name people by it: a name may hold
        any character, a slash among them)."""
        found = self.db.execute(
            f"SELECT {USER_COLUMNS} FROM users WHERE rowid = ?", (person_id,)
        ).fetchone()
        return None if found is None else user_of(found)

    def add_sign_in_link(self, person_id: int, key: str, expires: float) -> None:
        """A one-time sign-in link for that person: `key`, its token's digest (as a session
        cookie's, access.Sessions.stored_key), until `expires` (Unix seconds). Kept as a
        row of the sessions table of its own kind (its key starts with LINK), so that what
        ends a person's sessions (reset_access, disabling, removal) ends it too. A person
        has one live link at most: an earlier unused one stops working."""
        with self.write():
            self.db.execute(
                "DELETE FROM sessions WHERE person = ? AND key LIKE ?", (person_id, LINK + "%")
            )
            self.db.execute(
                "INSERT INTO sessions (key, expires, person) VALUES (?, ?, ?)",
                (LINK + key, expires, person_id),
            )

    def use_sign_in_link(self, key: str, password: str) -> User | None:
        """The person whose live link that is, their password set to `password` (its hash)
        and the link gone: it signs in once. None for a link used, expired or unknown, or
        a disabled person's."""
        with self.write():
            person = self.scalar(
                "SELECT person FROM sessions JOIN users ON users.rowid = sessions.person "
                "WHERE sessions.key = ? AND sessions.expires > ? AND users.disabled = 0",
                (LINK + key, time.time()),
            )
            if person is None:
                return None
            self.db.execute("DELETE FROM sessions WHERE key = ?", (LINK + key,))
            self.db.execute("UPDATE users SET password = ? WHERE rowid = ?", (password, person))
        return self.person(int(person))

    def change_password(self, person: int, password: str, kept: str) -> int:
        """The person's new password (its hash), and every session of theirs but the one
        whose key is `kept` ended: a password changed because someone else learnt it must
        not leave that someone signed in. How many ended."""
        with self.write():
            self.db.execute("UPDATE users SET password = ? WHERE rowid = ?", (password, person))
            return int(
                self.db.execute(
                    "DELETE FROM sessions WHERE person = ? AND key <> ?", (person, kept)
                ).rowcount
            )

    def remove_user(self, person_id: int, cache: OwnCache) -> RemovedUser:
        """That person and everything of theirs, in one transaction: their conversations
        (their messages and versions go with them), the turns and research runs kept for
        those, their rows of the search cache, their sessions and API tokens, their share
        of the Brave plan (limits and what they spent), the models they added, their row.
        NotFound when there is no such person; Conflict for the household's last admin (no
        one could manage it any more). Their memory.md is a file: the caller removes it after this
        commits (files.forget_memory)."""
        with self.write():
            person = self.person(person_id)
            if person is None:
                raise NotFound(f"no person {person_id}")
            self.keep_an_admin(person_id)
            theirs = "SELECT id FROM conversations WHERE owner = ?"
            for table in ("turn_events", "turn_runs", "leases"):
                self.db.execute(
                    f"DELETE FROM {table} WHERE conversation IN ({theirs})", (person_id,)
                )
            conversations = self.db.execute(
                "DELETE FROM conversations WHERE owner = ?", (person_id,)
            ).rowcount
            forget_searches(self, cache)
            for table in (
                "sessions",
                "api_tokens",
                "search_limits",
                "search_spent",
                "added_models",
            ):
                self.db.execute(f"DELETE FROM {table} WHERE person = ?", (person_id,))
            self.db.execute("DELETE FROM users WHERE rowid = ?", (person_id,))
        return RemovedUser(person.name, conversations)


@dataclass(frozen=True)
class RemovedUser:
    name: str
    conversations: int
    """How many of theirs went with them."""
