"""Conversations in SQLite (DATA_DIR/chat.db): a row per conversation, a row per message,
a row per answer version set aside (a turn a regenerate or an edit replaced).

One thread owns the connection and runs every query in the order they were asked, so no
request waits on the event loop for the disk, and a write asked for before another lands
before it (a turn's outcome before its lease is released). WAL mode lets other processes
sharing DATA_DIR read while one writes; writes take the lock up front (BEGIN IMMEDIATE).

A turn holds its conversation through a lease row (owner, expiry, renewed while it runs):
a second turn, a rewind or a delete meanwhile is refused, from any process. A lease whose
owner died (a crash) or expired is taken over.

memory.md stays a plain file people edit; `python -m app export` prints any conversation.
JSON files from before the database are imported on first start, then moved aside.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import socket
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, NotRequired, TypedDict, TypeVar

import anyio

from app import jsoncodec

logger = logging.getLogger(__name__)

ID_PATTERN = r"^[a-z0-9][a-z0-9-]{5,63}$"
ID = re.compile(ID_PATTERN)
NEW_TITLE = "New conversation"
DATABASE = "chat.db"
TOKEN_FILE = "access-token"
"""The token made at first start under Compose when AUTH_TOKEN is empty."""
LEASE_SECONDS = 30.0
"""A crashed owner on another host holds a conversation at most this long."""
BUSY_TIMEOUT_MS = 10_000
NO_POSITION = 2**62
"""After every message."""
MAX_REASON_CHARS = 500
"""A model server's refusal is kept this long: enough to say why, bounded whatever it sent."""
T = TypeVar("T")


class Message(TypedDict):
    """One entry of the log. An answer also carries its activity, sources, usage, status,
    timing, warnings and error, stored as they were streamed."""

    role: str
    content: str
    created: NotRequired[str]
    status: NotRequired[str]
    digest: NotRequired[str]
    """An answer's tool results in short (titles, addresses, dates, snippets, the start of
    each page read), wrapped as web data: what a follow-up question needs of its sources."""
    versions: NotRequired[VersionMark]
    """On a user message whose turn has versions (never stored: read from turn_versions)."""


class VersionMark(TypedDict):
    index: int
    """The version shown, from 1."""
    count: int


class Conversation(TypedDict):
    id: str
    title: str
    created: str
    updated: str
    settings: dict[str, Any]
    messages: list[Message]
    summary: str
    summarized: int
    """How many of the oldest messages the summary stands for."""
    title_from_message: NotRequired[bool]
    totals: NotRequired[dict[str, Any]]
    usage: NotRequired[dict[str, int]]
    """The last measured prompt, and how many messages it covered."""
    budget: NotRequired[dict[str, Any]]


class TailSnapshot(TypedDict):
    """A turn's version set aside (turn_versions.tail): its messages as stored (role,
    content, details, digest), the versions of the turns after it (position, slot, tail),
    and the conversation's measured prompt and context report when they were of this tail."""

    messages: list[tuple[str, str, str, str | None]]
    later: list[tuple[int, int, str]]
    usage: str | None
    budget: str | None


class Entry(TypedDict):
    """A conversation in the list."""

    id: str
    title: str
    created: str
    updated: str
    damaged: NotRequired[str]


class OutcomeWrite(TypedDict):
    """What a turn leaves in its conversation, written in one transaction."""

    position: int
    """Where the answer goes: right after the user's message."""
    answer: Message | None
    rewind: bool
    """Take the user's message back out (a turn that failed before any output)."""
    summary: str | None
    summarized: int | None
    totals: dict[str, int | float]
    """Added to the conversation's totals."""
    budget: dict[str, Any] | None
    usage: dict[str, int] | None


class ToolRefusal(TypedDict):
    """A model whose server refused the tool declarations: it is offered none until the
    user clears this, instead of each turn being refused and sent again."""

    model: str
    at: str
    reason: str
    """The model server's words."""


class NotFound(LookupError):
    """No conversation with that id."""


class InvalidId(ValueError):
    """Not a conversation id: refused before anything touches the disk."""


class Damaged(ValueError):
    """Data that cannot be read as what it should be; the message says which and what to
    do. The rest of the data stays usable."""


class Conflict(RuntimeError):
    """The request does not apply to the conversation as it is now (nothing to rewind)."""


class Busy(Conflict):
    """A turn holds the conversation."""


def now() -> str:
    # Microseconds: the conversation list sorts on it, and edits come within a second.
    return datetime.now(UTC).isoformat(timespec="microseconds")


def private_dir(path: Path) -> None:
    """DATA_DIR, made readable by its owner alone whatever the umask: it holds every
    conversation, memory.md and the access token."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o700)


def private_file(path: Path) -> None:
    """An empty file only its owner may read, unless it exists (SQLite gives its journal
    files the database's mode)."""
    private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        path.chmod(0o600)  # whatever the umask took away or not


def stored_token(data_dir: Path) -> tuple[str, bool]:
    """The access token kept in DATA_DIR, made (256 random bits, a file only its owner can
    read) if there is none yet: (token, made now)."""
    private_dir(data_dir)
    path = data_dir / TOKEN_FILE
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip(), False
    os.fchmod(fd, 0o600)  # whatever the umask
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    return token, True


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_id(conversation_id: str) -> str:
    if not isinstance(conversation_id, str) or not ID.fullmatch(conversation_id):
        raise InvalidId(f"invalid conversation id: {conversation_id!r}")
    return conversation_id


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


# Letters with no decomposition, which unicode61's remove_diacritics leaves as they are.
FOLDED = str.maketrans(
    dict(zip("łŁøØđĐðÐħĦıŀĿ", "lLoOdDdDhHilL", strict=True))
    | {"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "þ": "th", "Þ": "TH"}
)


def fold(text: str | None) -> str | None:
    """Text as the search index holds it; SQL's fold() in the index's triggers."""
    return text.translate(FOLDED) if text is not None else None


# Each migration takes the schema from its index to the next; PRAGMA user_version says
# where a database stands. Append, never edit: a database out there is at some step.
MIGRATIONS = [
    """
    CREATE TABLE conversations (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        title_from_message INTEGER NOT NULL DEFAULT 0,
        created TEXT NOT NULL,
        updated TEXT NOT NULL,
        settings TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        summarized INTEGER NOT NULL DEFAULT 0,
        totals TEXT,
        usage TEXT,
        budget TEXT
    );
    CREATE INDEX conversations_updated ON conversations (updated);
    CREATE TABLE messages (
        rowid INTEGER PRIMARY KEY,
        conversation INTEGER NOT NULL REFERENCES conversations (rowid) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        details TEXT NOT NULL,
        UNIQUE (conversation, position)
    );
    CREATE TABLE models (position INTEGER PRIMARY KEY, id TEXT NOT NULL);
    CREATE TABLE leases (
        conversation TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires REAL NOT NULL
    );
    CREATE VIRTUAL TABLE message_words USING fts5 (
        content, content='messages', content_rowid='rowid',
        tokenize='unicode61 remove_diacritics 2'
    );
    CREATE VIRTUAL TABLE title_words USING fts5 (
        title, content='conversations', content_rowid='rowid',
        tokenize='unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN
        INSERT INTO message_words (rowid, content) VALUES (new.rowid, new.content);
    END;
    CREATE TRIGGER messages_removed AFTER DELETE ON messages BEGIN
        INSERT INTO message_words (message_words, rowid, content)
        VALUES ('delete', old.rowid, old.content);
    END;
    CREATE TRIGGER messages_changed AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO message_words (message_words, rowid, content)
        VALUES ('delete', old.rowid, old.content);
        INSERT INTO message_words (rowid, content) VALUES (new.rowid, new.content);
    END;
    CREATE TRIGGER conversations_added AFTER INSERT ON conversations BEGIN
        INSERT INTO title_words (rowid, title) VALUES (new.rowid, new.title);
    END;
    CREATE TRIGGER conversations_removed AFTER DELETE ON conversations BEGIN
        INSERT INTO title_words (title_words, rowid, title) VALUES ('delete', old.rowid, old.title);
    END;
    CREATE TRIGGER conversations_renamed AFTER UPDATE OF title ON conversations BEGIN
        INSERT INTO title_words (title_words, rowid, title) VALUES ('delete', old.rowid, old.title);
        INSERT INTO title_words (rowid, title) VALUES (new.rowid, new.title);
    END;
    """,
    """
    CREATE TABLE tool_refusals (
        model TEXT PRIMARY KEY,
        at TEXT NOT NULL,
        reason TEXT NOT NULL
    );
    """,
    # Search folds the letters unicode61 keeps (ł, ø, đ, ß...): "lodz" finds "Łódź".
    """
    DROP TRIGGER messages_added;
    DROP TRIGGER messages_removed;
    DROP TRIGGER messages_changed;
    DROP TRIGGER conversations_added;
    DROP TRIGGER conversations_removed;
    DROP TRIGGER conversations_renamed;
    CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN
        INSERT INTO message_words (rowid, content) VALUES (new.rowid, fold(new.content));
    END;
    CREATE TRIGGER messages_removed AFTER DELETE ON messages BEGIN
        INSERT INTO message_words (message_words, rowid, content)
        VALUES ('delete', old.rowid, fold(old.content));
    END;
    CREATE TRIGGER messages_changed AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO message_words (message_words, rowid, content)
        VALUES ('delete', old.rowid, fold(old.content));
        INSERT INTO message_words (rowid, content) VALUES (new.rowid, fold(new.content));
    END;
    CREATE TRIGGER conversations_added AFTER INSERT ON conversations BEGIN
        INSERT INTO title_words (rowid, title) VALUES (new.rowid, fold(new.title));
    END;
    CREATE TRIGGER conversations_removed AFTER DELETE ON conversations BEGIN
        INSERT INTO title_words (title_words, rowid, title)
        VALUES ('delete', old.rowid, fold(old.title));
    END;
    CREATE TRIGGER conversations_renamed AFTER UPDATE OF title ON conversations BEGIN
        INSERT INTO title_words (title_words, rowid, title)
        VALUES ('delete', old.rowid, fold(old.title));
        INSERT INTO title_words (rowid, title) VALUES (new.rowid, fold(new.title));
    END;
    INSERT INTO message_words (message_words) VALUES ('delete-all');
    INSERT INTO message_words (rowid, content) SELECT rowid, fold(content) FROM messages;
    INSERT INTO title_words (title_words) VALUES ('delete-all');
    INSERT INTO title_words (rowid, title) SELECT rowid, fold(title) FROM conversations;
    """,
    # An answer's digest of its sources in a column: every turn reads the recent ones, and
    # picking them out of the details' JSON cost more than the rest of the load.
    """
    ALTER TABLE messages ADD COLUMN digest TEXT;
    UPDATE messages
    SET digest = json_extract(details, '$.digest'), details = json_remove(details, '$.digest')
    WHERE json_valid(details) AND json_type(details, '$.digest') = 'text';
    """,
    # Answer versions: a turn's tail (its user message and what follows) set aside when a
    # regenerate or an edit replaced it, as JSON (a TailSnapshot). `slot` is its place
    # among the turn's versions; the shown version's slot is the one no row holds.
    """
    CREATE TABLE turn_versions (
        rowid INTEGER PRIMARY KEY,
        conversation INTEGER NOT NULL REFERENCES conversations (rowid) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        slot INTEGER NOT NULL,
        tail TEXT NOT NULL,
        UNIQUE (conversation, position, slot)
    );
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)

HAS_MESSAGES = "EXISTS (SELECT 1 FROM messages WHERE messages.conversation = conversations.rowid)"

EMPTY_KEPT = timedelta(hours=1)
"""How long a conversation with no message is kept after its last change: the page creates
one and sends its first message at once, and after a failed first turn it keeps the id to
send again; older than this, nobody is coming back to it (see Database.drop_empty)."""

CONVERSATION_COLUMNS = (
    "rowid, id, title, title_from_message, created, updated, settings, summary, summarized, "
    "totals, usage, budget"
)


class Database:
    """The queries, run by one thread at a time (Storage's). Usable alone: the CLI's export
    and the benchmarks open it directly."""

    def __init__(self, path: Path) -> None:
        private_file(path)
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self.db.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode survives a crash of the process; a turn's outcome asks for
        # FULL (see `write`), which survives a power cut too.
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("PRAGMA foreign_keys = ON")
        self.db.create_function("owner_alive", 1, owner_alive, deterministic=False)
        self.db.create_function("fold", 1, fold, deterministic=True)
        self.migrate()

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def write(self, *, durable: bool = False) -> Iterator[None]:
        """One transaction holding the write lock from its start."""
        if durable:
            self.db.execute("PRAGMA synchronous = FULL")
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        finally:
            if durable:
                self.db.execute("PRAGMA synchronous = NORMAL")

    def migrate(self) -> None:
        with self.write():
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise Damaged(
                    f"{self.path} was written by a newer version of this service (schema "
                    f"{version}, this one knows {SCHEMA_VERSION}): update the service"
                )
            for script in MIGRATIONS[version:]:
                for statement in split_script(script):
                    self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def integrity(self) -> str:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0]

    # -- conversations --------------------------------------------------------------------

    def create(self, title: str, settings: dict[str, Any]) -> Conversation:
        conversation_id = datetime.now(UTC).strftime("%Y%m%d-") + secrets.token_hex(5)
        stamp = now()
        with self.write():
            self.drop_empty()  # each new conversation sweeps the abandoned ones
            self.db.execute(
                "INSERT INTO conversations (id, title, created, updated, settings) "
                "VALUES (?, ?, ?, ?, ?)",
                (conversation_id, title, stamp, stamp, jsoncodec.dumps_text(settings)),
            )
        return self.load(conversation_id)

    def load(
        self, conversation_id: str, *, details: bool = True, digests: int | None = None
    ) -> Conversation:
        """The conversation; without `details` its messages are role, text and digest only
        (what a turn sends the model): their details (activity, sources) are most of the
        parsing. `digests`: only that many of the latest digests (a turn sends no more, and
        each is a few KB to read)."""
        row = self.row(conversation_id)
        try:
            conversation = conversation_from_row(row)
            conversation["messages"] = self.messages(row[0], details=details, digests=digests)
            if details:
                messages = conversation["messages"]
                for position, mark in self.version_marks(row[0]).items():
                    if position < len(messages) and messages[position]["role"] == "user":
                        messages[position]["versions"] = mark
        except ValueError as exc:
            raise Damaged(
                f"conversation {conversation_id} is damaged in {self.path} ({exc}): "
                f"export what is readable with `python -m app export {conversation_id}`, "
                "or delete it"
            ) from None
        return conversation

    def settings(self, conversation_id: str) -> dict[str, Any]:
        """Only the settings: what a request checks before a turn starts."""
        return settings_of(self.row(conversation_id))

    def messages(self, rowid: int, *, details: bool, digests: int | None) -> list[Message]:
        since = 0 if digests is None else self.digests_since(rowid, digests)
        columns = "role, content, CASE WHEN position >= ? THEN digest END"
        if details:
            columns += ", details"
        rows = self.db.execute(
            f"SELECT {columns} FROM messages WHERE conversation = ? ORDER BY position",
            (since, rowid),
        )
        if not details:
            return [brief(*row) for row in rows]
        return [{**brief(*row[:3]), **jsoncodec.loads(row[3])} for row in rows]

    def digests_since(self, rowid: int, count: int) -> int:
        """The position from which the last `count` digests are."""
        row = self.db.execute(
            "SELECT min(position) FROM (SELECT position FROM messages WHERE conversation = ? "
            "AND digest IS NOT NULL ORDER BY position DESC LIMIT ?)",
            (rowid, count),
        ).fetchone()
        return NO_POSITION if row[0] is None else row[0]

    def digests(self, conversation_id: str, start: int, end: int) -> dict[int, str]:
        """The digests of the messages from `start` to `end` (excluded), by position."""
        rows = self.db.execute(
            "SELECT position, digest FROM messages WHERE conversation = ? "
            "AND position >= ? AND position < ? AND digest IS NOT NULL",
            (self.row(conversation_id)[0], start, end),
        )
        return dict(rows)

    def row(self, conversation_id: str) -> tuple:
        row = self.db.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?",
            (check_id(conversation_id),),
        ).fetchone()
        if row is None:
            raise NotFound(f"no conversation {conversation_id}")
        return row

    def ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM conversations ORDER BY created")]

    def list(self, query: str = "") -> list[Entry]:
        """Newest first; with a query, those whose title or messages have words starting
        with each of the query's words (any case, accents optional). A conversation with no
        message is not listed: nothing in it to go back to (a failed first turn, a rewind of
        its only message, settings saved before the first message)."""
        columns = "id, title, created, updated, json_valid(settings)"
        if not query.strip():
            rows = self.db.execute(
                f"SELECT {columns} FROM conversations WHERE {HAS_MESSAGES} ORDER BY updated DESC"
            )
        else:
            words = re.findall(r"\w+", fold(query))
            if not words:
                return []
            match = " ".join('"' + word.replace('"', '""') + '"*' for word in words)
            rows = self.db.execute(
                f"SELECT {columns} FROM conversations WHERE rowid IN ("
                " SELECT rowid FROM title_words WHERE title_words MATCH ?"
                " UNION SELECT m.conversation FROM message_words"
                " JOIN messages m ON m.rowid = message_words.rowid WHERE message_words MATCH ?"
                f") AND {HAS_MESSAGES} ORDER BY updated DESC",
                (match, match),
            )
        entries: list[Entry] = []
        for conversation_id, title, created, updated, valid in rows:
            entry: Entry = {"id": conversation_id, "title": title, "created": created}
            entry["updated"] = updated
            if not valid:
                entry["damaged"] = "its settings are not valid JSON"
            entries.append(entry)
        return entries

    def drop_empty(self) -> int:
        """Delete the conversations with no message untouched for EMPTY_KEPT and held by no
        live lease (one being answered is never taken): never listed, nothing in them to go
        back to. In the caller's transaction, or its own. Returns how many went."""
        before = (datetime.now(UTC) - EMPTY_KEPT).isoformat(timespec="microseconds")
        with contextlib.nullcontext() if self.db.in_transaction else self.write():
            gone = self.db.execute(
                f"DELETE FROM conversations WHERE updated < ? AND NOT {HAS_MESSAGES} "
                "AND id NOT IN (SELECT conversation FROM leases "
                "WHERE expires >= ? AND owner_alive(owner))",
                (before, time.time()),
            ).rowcount
            if gone:
                self.db.execute(
                    "DELETE FROM leases WHERE conversation NOT IN (SELECT id FROM conversations)"
                )
        return gone

    def change(
        self, conversation_id: str, title: str | None, settings: dict[str, Any]
    ) -> Conversation:
        """Rename and change settings; a turn running meanwhile keeps its own copy. A
        rename alone leaves the conversation's place in the list (its "updated")."""
        with self.write():
            row = self.row(conversation_id)
            if settings:
                merged = {**jsoncodec.loads(row[6]), **settings}
                self.db.execute(
                    "UPDATE conversations SET settings = ?, updated = ? WHERE rowid = ?",
                    (jsoncodec.dumps_text(merged), now(), row[0]),
                )
            if title is not None:
                self.db.execute(
                    "UPDATE conversations SET title = ?, title_from_message = 0 WHERE rowid = ?",
                    (title, row[0]),
                )
        return self.load(conversation_id)

    def delete(self, conversation_id: str) -> None:
        with self.write():
            self.row(conversation_id)
            self.refuse_if_held(conversation_id, "delete")
            self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            self.db.execute("DELETE FROM leases WHERE conversation = ?", (conversation_id,))

    def begin_turn(
        self,
        conversation_id: str,
        owner: str,
        message: str | None,
        model: str,
        digests: int | None = None,
        *,
        edit: bool = False,
    ) -> Conversation | None:
        """A turn's start, in one transaction: the lease for `owner`, then the user's
        `message` at the end of the log (with `edit`, in the last one's place) or, for
        Regenerate (None), what followed the last user message removed (the replaced turn
        kept as a version); the model chosen is saved. Returns the conversation as the turn reads
        it (see `load`: only the last `digests` digests), or None, with nothing written,
        if a live owner holds it; damage found while reading it undoes the whole start."""
        # No fsync of its own: the outcome's, at the turn's end, covers the message too
        # (a power cut before then loses the turn either way).
        with self.write():
            row = self.row(conversation_id)
            taken = self.db.execute(
                "INSERT INTO leases (conversation, owner, expires) VALUES (?, ?, ?) "
                "ON CONFLICT (conversation) DO UPDATE SET owner = excluded.owner, "
                "expires = excluded.expires "
                "WHERE leases.expires < ? OR NOT owner_alive(leases.owner)",
                (conversation_id, owner, time.time() + LEASE_SECONDS, time.time()),
            )
            if taken.rowcount != 1:
                return None
            if message is None:
                self.drop_answer(row)
            elif edit:
                self.replace_last_message(row, message)
            else:
                self.append_user_message(row, message)
            self.set_model(row, model)
            return self.load(conversation_id, details=False, digests=digests)

    def append_user_message(self, row: tuple, text: str) -> None:
        """The first message names a conversation still called NEW_TITLE."""
        position = self.next_position(row[0])
        if position == 0 and row[2] == NEW_TITLE:
            self.db.execute(
                "UPDATE conversations SET title = ?, title_from_message = 1 WHERE rowid = ?",
                (" ".join(text.split())[:60].strip(), row[0]),
            )
        self.insert(row[0], position, {"role": "user", "content": text, "created": now()})

    def drop_answer(self, row: tuple) -> None:
        """For Regenerate: what follows the last user message goes, kept as a version of its
        turn when it holds an answer (a failed attempt or no answer at all is not worth one)."""
        last = self.last_user_position(row, "regenerate")
        answered = self.db.execute(
            "SELECT 1 FROM messages WHERE conversation = ? AND position > ? "
            "AND role = 'assistant' AND coalesce(json_extract(details, '$.status'), '') != 'error'",
            (row[0], last),
        ).fetchone()
        if answered and last >= row[8]:
            self.set_aside(row, last)
        self.db.execute(
            "DELETE FROM messages WHERE conversation = ? AND position > ?", (row[0], last)
        )

    def replace_last_message(self, row: tuple, text: str) -> None:
        """For Edit: the last user message and its answer become a version of the turn; the
        new text takes their place."""
        last = self.last_user_position(row, "edit")
        if last < row[8]:
            raise Conflict("that message is folded into the summary: it cannot be edited")
        self.set_aside(row, last)
        self.db.execute(
            "DELETE FROM messages WHERE conversation = ? AND position >= ?", (row[0], last)
        )
        self.insert(row[0], last, {"role": "user", "content": text, "created": now()})

    def last_user_position(self, row: tuple, what: str) -> int:
        last = self.db.execute(
            "SELECT max(position) FROM messages WHERE conversation = ? AND role = 'user'",
            (row[0],),
        ).fetchone()[0]
        if last is None:
            raise Conflict(f"nothing to {what}: the conversation has no message")
        return last

    def rewind(self, conversation_id: str) -> str:
        """Take the last user message (and what follows) out of the log; its text."""
        with self.write():
            row = self.row(conversation_id)
            self.refuse_if_held(conversation_id, "rewind")
            return self.take_back(row)

    def take_back(self, row: tuple) -> str:
        found = self.db.execute(
            "SELECT position, content FROM messages WHERE conversation = ? AND role = 'user' "
            "ORDER BY position DESC LIMIT 1",
            (row[0],),
        ).fetchone()
        if found is None:
            raise Conflict("nothing to rewind: the conversation has no message")
        position, text = found
        self.db.execute(
            "DELETE FROM messages WHERE conversation = ? AND position >= ?", (row[0], position)
        )
        # A message that had replaced a version (an edit, a regenerate) gives it back.
        restored = self.bring_back_latest(row, position)
        if not restored and position == 0 and row[3]:  # the title came from this message
            self.db.execute(
                "UPDATE conversations SET title = ?, title_from_message = 0 WHERE rowid = ?",
                (NEW_TITLE, row[0]),
            )
        self.touch(row[0])
        return text

    def put_message(self, conversation_id: str, position: int, message: Message) -> None:
        """An answer being streamed, at its place (a checkpoint)."""
        with self.write():
            row = self.row(conversation_id)
            self.upsert(row[0], position, message)
            self.db.execute("UPDATE conversations SET updated = ? WHERE rowid = ?", (now(), row[0]))

    def drop_message(self, conversation_id: str, position: int) -> None:
        """A checkpointed answer whose text was discarded, with nothing left to keep."""
        with self.write():
            row = self.row(conversation_id)
            self.db.execute(
                "DELETE FROM messages WHERE conversation = ? AND position = ?", (row[0], position)
            )

    def save_outcome(
        self, conversation_id: str, outcome: OutcomeWrite, owner: str
    ) -> dict[str, Any]:
        """A turn's whole outcome in one transaction, which releases the turn's lease (the
        outcome is written before another turn can start); the conversation's new totals."""
        with self.write(durable=True):
            row = self.row(conversation_id)
            self.drop_lease(conversation_id, owner)
            if outcome["rewind"]:
                self.db.execute(
                    "DELETE FROM messages WHERE conversation = ? AND position >= ?",
                    (row[0], outcome["position"]),
                )
                self.take_back(row)
            elif outcome["answer"] is not None:
                self.upsert(row[0], outcome["position"], outcome["answer"])
            totals = jsoncodec.loads(row[9] or "{}")
            for key, value in outcome["totals"].items():
                totals[key] = totals.get(key, 0) + value
            changes: dict[str, Any] = {"totals": jsoncodec.dumps_text(totals), "updated": now()}
            if outcome["summary"] is not None:
                changes["summary"] = outcome["summary"]
            if outcome["summarized"] is not None:
                changes["summarized"] = outcome["summarized"]
            if outcome["budget"] is not None:
                changes["budget"] = jsoncodec.dumps_text(outcome["budget"])
            if outcome["usage"] is not None:
                changes["usage"] = jsoncodec.dumps_text(outcome["usage"])
            assignments = ", ".join(f"{column} = ?" for column in changes)
            self.db.execute(
                f"UPDATE conversations SET {assignments} WHERE rowid = ?",
                (*changes.values(), row[0]),
            )
            return totals

    # -- helpers of the above, inside their transaction -------------------------------------

    def next_position(self, rowid: int) -> int:
        # Positions run from 0 without a gap (only the end is ever removed): max, which
        # the (conversation, position) index answers at once, where count reads them all.
        query = "SELECT max(position) FROM messages WHERE conversation = ?"
        last = self.db.execute(query, (rowid,)).fetchone()[0]
        return 0 if last is None else last + 1

    def insert(self, rowid: int, position: int, message: Message) -> None:
        self.db.execute(
            "INSERT INTO messages (conversation, position, role, content, details, digest) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (rowid, position, *message_columns(message)),
        )

    def upsert(self, rowid: int, position: int, message: Message) -> None:
        self.db.execute(
            "INSERT INTO messages (conversation, position, role, content, details, digest) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (conversation, position) DO UPDATE SET "
            "role = excluded.role, content = excluded.content, details = excluded.details, "
            "digest = excluded.digest",
            (rowid, position, *message_columns(message)),
        )

    def set_model(self, row: tuple, model: str) -> None:
        """The picker's choice is saved at once; the conversation was updated either way."""
        settings = settings_of(row)
        if settings.get("model") == model:
            self.touch(row[0])
            return
        self.db.execute(
            "UPDATE conversations SET settings = ?, updated = ? WHERE rowid = ?",
            (jsoncodec.dumps_text({**settings, "model": model}), now(), row[0]),
        )

    def touch(self, rowid: int) -> None:
        self.db.execute("UPDATE conversations SET updated = ? WHERE rowid = ?", (now(), rowid))

    def refuse_if_held(self, conversation_id: str, what: str) -> None:
        if self.held(conversation_id):
            raise Busy(f"a turn is running in this conversation; stop it first, then {what}")

    # -- answer versions ------------------------------------------------------------------

    def version_marks(self, rowid: int) -> dict[int, VersionMark]:
        """By user message position: which version is shown, of how many."""
        rows = self.db.execute(
            "SELECT position, count(*), sum(slot) FROM turn_versions WHERE conversation = ? "
            "GROUP BY position",
            (rowid,),
        )
        marks: dict[int, VersionMark] = {}
        for position, kept, slots in rows:
            count = kept + 1
            marks[position] = {"index": count * (count - 1) // 2 - slots + 1, "count": count}
        return marks

    def switch_version(self, conversation_id: str, position: int, index: int) -> Conversation:
        """Show version `index` (from 1) of the turn whose user message is at `position`:
        the tail shown now is set aside in its slot, the chosen one takes its place."""
        with self.write():
            row = self.row(conversation_id)
            self.refuse_if_held(conversation_id, "switch versions")
            mark = self.version_marks(row[0]).get(position)
            if mark is None:
                raise Conflict(f"the message at position {position} has no other versions")
            if not 1 <= index <= mark["count"]:
                raise Conflict(f"no version {index}: this turn has {mark['count']}")
            if position < row[8]:
                raise Conflict("that turn is folded into the summary: its versions are kept only")
            if index != mark["index"]:
                chosen = self.db.execute(
                    "SELECT rowid FROM turn_versions WHERE conversation = ? AND position = ? "
                    "AND slot = ?",
                    (row[0], position, index - 1),
                ).fetchone()[0]
                self.set_aside(row, position)
                self.db.execute(
                    "DELETE FROM messages WHERE conversation = ? AND position >= ?",
                    (row[0], position),
                )
                self.bring_back(row, position, chosen)
                self.touch(row[0])
        return self.load(conversation_id)

    def set_aside(self, row: tuple, position: int) -> None:
        """A copy of the tail from `position` (with the versions of its later turns and the
        prompt measured over it) becomes a version in the shown slot; the caller replaces
        the tail, which takes the next slot. The shown tail's own rows stay to the caller."""
        rowid = row[0]
        slot = self.version_marks(rowid).get(position, {"index": 1})["index"] - 1
        messages = self.db.execute(
            "SELECT role, content, details, digest FROM messages WHERE conversation = ? "
            "AND position >= ? ORDER BY position",
            (rowid, position),
        ).fetchall()
        later = self.db.execute(
            "SELECT position, slot, tail FROM turn_versions WHERE conversation = ? "
            "AND position > ? ORDER BY rowid",
            (rowid, position),
        ).fetchall()
        usage, budget = self.db.execute(
            "SELECT usage, budget FROM conversations WHERE rowid = ?", (rowid,)
        ).fetchone()
        measured_here = usage is not None and measured_messages(usage) > position
        tail: TailSnapshot = {
            "messages": messages,
            "later": later,
            "usage": usage if measured_here else None,
            "budget": budget,
        }
        self.db.execute(
            "INSERT INTO turn_versions (conversation, position, slot, tail) VALUES (?, ?, ?, ?)",
            (rowid, position, slot, jsoncodec.dumps_text(tail)),
        )
        self.db.execute(
            "DELETE FROM turn_versions WHERE conversation = ? AND position > ?", (rowid, position)
        )
        if measured_here:  # that prompt was measured over the tail set aside
            self.db.execute("UPDATE conversations SET usage = NULL WHERE rowid = ?", (rowid,))

    def bring_back(self, row: tuple, position: int, version: int) -> None:
        """Version row `version` becomes the tail from `position` (which the caller emptied)."""
        rowid = row[0]
        (text,) = self.db.execute(
            "SELECT tail FROM turn_versions WHERE rowid = ?", (version,)
        ).fetchone()
        tail: TailSnapshot = jsoncodec.loads(text)
        self.db.execute("DELETE FROM turn_versions WHERE rowid = ?", (version,))
        self.db.executemany(
            "INSERT INTO messages (conversation, position, role, content, details, digest) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(rowid, position + i, *columns) for i, columns in enumerate(tail["messages"])],
        )
        self.db.executemany(
            "INSERT INTO turn_versions (conversation, position, slot, tail) VALUES (?, ?, ?, ?)",
            [(rowid, *later) for later in tail["later"]],
        )
        usage = self.db.execute("SELECT usage FROM conversations WHERE rowid = ?", (rowid,))
        current = usage.fetchone()[0]
        if tail["usage"] is not None or (current and measured_messages(current) > position):
            self.db.execute(
                "UPDATE conversations SET usage = ? WHERE rowid = ?", (tail["usage"], rowid)
            )
        if tail["budget"] is not None:
            self.db.execute(
                "UPDATE conversations SET budget = ? WHERE rowid = ?", (tail["budget"], rowid)
            )

    def bring_back_latest(self, row: tuple, position: int) -> bool:
        """The version set aside last at `position`, shown again (the tail is empty)."""
        latest = self.db.execute(
            "SELECT max(rowid) FROM turn_versions WHERE conversation = ? AND position = ?",
            (row[0], position),
        ).fetchone()[0]
        if latest is None:
            return False
        self.bring_back(row, position, latest)
        return True

    # -- leases ---------------------------------------------------------------------------

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

    # -- the user's models ----------------------------------------------------------------

    def models(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM models ORDER BY position")]

    def set_models(self, models: list[str]) -> None:
        with self.write():
            self.db.execute("DELETE FROM models")
            self.db.executemany(
                "INSERT INTO models (position, id) VALUES (?, ?)", enumerate(models)
            )

    # -- models that refused the tools ----------------------------------------------------

    def tool_refusals(self) -> list[ToolRefusal]:
        rows = self.db.execute("SELECT model, at, reason FROM tool_refusals ORDER BY model")
        return [{"model": model, "at": at, "reason": reason} for model, at, reason in rows]

    def tool_refusal(self, model: str) -> ToolRefusal | None:
        row = self.db.execute(
            "SELECT model, at, reason FROM tool_refusals WHERE model = ?", (model,)
        ).fetchone()
        return {"model": row[0], "at": row[1], "reason": row[2]} if row else None

    def refuse_tools(self, model: str, reason: str) -> ToolRefusal:
        refusal: ToolRefusal = {"model": model, "at": now(), "reason": reason[:MAX_REASON_CHARS]}
        with self.write():
            self.db.execute(
                "INSERT INTO tool_refusals (model, at, reason) VALUES (?, ?, ?) "
                "ON CONFLICT (model) DO UPDATE SET at = excluded.at, reason = excluded.reason",
                (refusal["model"], refusal["at"], refusal["reason"]),
            )
        return refusal

    def forget_tool_refusal(self, model: str) -> bool:
        """Whether there was one: the next turn with this model declares the tools again."""
        with self.write():
            forgotten = self.db.execute("DELETE FROM tool_refusals WHERE model = ?", (model,))
            return forgotten.rowcount == 1

    # -- import of the JSON files of earlier versions -------------------------------------

    def import_files(self, root: Path) -> int:
        """Conversations from DATA_DIR/conversations/*.json, then the folder is renamed
        aside (never deleted). Safe to repeat after a crash: an id already here is skipped.
        Returns how many were imported."""
        folder = root / "conversations"
        imported = 0
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                conversation = parse_conversation(path.read_bytes())
                check_id(conversation["id"])
            except (OSError, ValueError) as exc:
                logger.warning("not imported, kept in the folder set aside: %s (%s)", path, exc)
                continue
            imported += self.import_one(conversation)
        models_file = root / "models.json"
        if models_file.exists():
            try:
                listed = jsoncodec.loads(models_file.read_text(encoding="utf-8"))
                self.set_models([m for m in listed if isinstance(m, str)])
            except ValueError as exc:
                logger.warning("models.json not imported (%s)", exc)
            models_file.rename(root / "models.json.imported")
        if folder.is_dir():
            aside = root / f"conversations.imported-{datetime.now(UTC):%Y%m%d-%H%M%S}"
            folder.rename(aside)
            logger.info(
                "imported %d conversation files into %s; the files are in %s",
                imported,
                self.path,
                aside,
            )
        return imported

    def import_one(self, conversation: dict[str, Any]) -> int:
        with self.write(durable=True):
            exists = "SELECT 1 FROM conversations WHERE id = ?"
            if self.db.execute(exists, (conversation["id"],)).fetchone():
                return 0
            stamp = now()
            optional = [conversation.get(k) for k in ("totals", "usage", "budget")]
            rowid = self.db.execute(
                "INSERT INTO conversations (id, title, title_from_message, created, updated, "
                "settings, summary, summarized, totals, usage, budget) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation["id"],
                    conversation["title"],
                    int(bool(conversation.get("title_from_message"))),
                    str(conversation.get("created") or stamp),
                    str(conversation.get("updated") or stamp),
                    jsoncodec.dumps_text(conversation["settings"]),
                    str(conversation.get("summary") or ""),
                    int(conversation.get("summarized") or 0),
                    *(None if value is None else jsoncodec.dumps_text(value) for value in optional),
                ),
            ).lastrowid
            for position, message in enumerate(conversation["messages"]):
                if isinstance(message, dict) and isinstance(message.get("role"), str):
                    self.insert(
                        rowid, position, {**message, "content": str(message.get("content") or "")}
                    )
            return 1


class Storage:
    """The database for the service: each query runs in Storage's own thread, awaited
    without blocking the event loop and never cut short by a cancellation (Stop), so a
    write that was asked for is made."""

    def __init__(self, root: Path, *, turn_digests: int | None = None) -> None:
        self.root = root
        self.turn_digests = turn_digests
        """How many of the latest answers' digests a turn reads (KEEP_SOURCES_TURNS); all
        when None."""
        self.memory_path = root / "memory.md"
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage")
        self.database = Database(root / DATABASE)

    async def run(self, query: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        call = partial(query, *args, **kwargs)
        future = asyncio.get_running_loop().run_in_executor(self.thread, call)
        with anyio.CancelScope(shield=True):
            return await asyncio.shield(future)

    def open(self) -> None:
        """At start: import old files, remove temporary files a crash left mid-write and
        the conversations left with no message."""
        self.database.import_files(self.root)
        if dropped := self.database.drop_empty():
            logger.info("removed %d conversations with no message", dropped)
        leftovers = list(self.root.glob(".*.tmp"))
        for leftover in leftovers:
            leftover.unlink(missing_ok=True)
        if leftovers:
            logger.info("removed %d temporary files left by a crash", len(leftovers))

    def close(self) -> None:
        self.thread.shutdown(wait=True)
        self.database.close()

    async def begin_turn(
        self, conversation_id: str, message: str | None, model: str, *, edit: bool = False
    ) -> tuple[Lease, TurnInput]:
        """The conversation for one turn, its message written (see Database.begin_turn), and
        what the turn reads, in one trip to this thread: it is the wait before the model is
        asked. The lease is renewed until released. Busy if a turn holds the conversation."""
        owner = new_owner()
        start = await self.run(self.started, conversation_id, owner, message, model, edit)
        if start is None:
            raise Busy("a turn is already running in this conversation")
        lease = Lease(self, conversation_id, owner)
        lease.renewal = asyncio.create_task(lease.keep())
        return lease, start

    def started(
        self, conversation_id: str, owner: str, message: str | None, model: str, edit: bool
    ) -> TurnInput | None:
        conversation = self.database.begin_turn(
            conversation_id, owner, message, model, self.turn_digests, edit=edit
        )
        if conversation is None:
            return None
        refusal = self.database.tool_refusal(model)
        keeps = message is None or edit
        try:
            return TurnInput(conversation, refusal, self.memory_text(), None, keeps)
        except Damaged as exc:
            return TurnInput(conversation, refusal, "", exc, keeps)

    async def read_memory(self) -> str:
        return await self.run(self.memory_text)

    async def write_memory(self, text: str) -> None:
        await self.run(write_atomic, self.memory_path, text)

    def memory_text(self) -> str:
        try:
            return self.memory_path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return ""
        except UnicodeDecodeError as exc:
            raise Damaged(
                f"{self.memory_path} is not UTF-8 text (byte {exc.start}): "
                "save it as UTF-8, or replace it in Settings"
            ) from None


@dataclass
class TurnInput:
    """What a turn reads before it starts."""

    conversation: Conversation
    """Its messages without their details (see Database.load)."""
    refusal: ToolRefusal | None
    """The model refused the tools in an earlier turn."""
    memory: str
    memory_damaged: Damaged | None
    """memory.md could not be read (and `memory` is empty)."""
    keeps_message: bool = False
    """Regenerate and Edit: a failure before any output leaves the message unanswered
    rather than taking it back (what they replaced is a version to go back to)."""


@dataclass
class Lease:
    storage: Storage
    conversation_id: str
    owner: str
    renewal: asyncio.Task[None] | None = None
    released: bool = False

    async def keep(self) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            renewed = await self.storage.run(
                self.storage.database.renew, self.conversation_id, self.owner
            )
            if not renewed and not self.released:  # not released meanwhile by its outcome
                logger.warning(
                    "lost the lease of %s (expired and taken over)", self.conversation_id
                )
                return

    async def release(self) -> None:
        """Idempotent; only this owner's row goes."""
        if self.released:
            return
        self.dropped()
        await self.storage.run(self.storage.database.release, self.conversation_id, self.owner)

    def dropped(self) -> None:
        """The row is gone (the turn's outcome was written with it): stop renewing."""
        self.released = True
        if self.renewal:
            self.renewal.cancel()
            # Its frame holds this lease: kept, the pair would be a cycle for the collector.
            self.renewal = None


def split_script(script: str) -> list[str]:
    """Statements of a migration, triggers kept whole (their bodies hold semicolons)."""
    statements, current = [], ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements


def message_columns(message: Message) -> tuple[str, str, str, str | None]:
    details = {k: v for k, v in message.items() if k not in ("role", "content", "digest")}
    return message["role"], message["content"], jsoncodec.dumps_text(details), message.get("digest")


def measured_messages(usage: str) -> int:
    """How many messages a stored measured prompt covered."""
    return int(jsoncodec.loads(usage).get("measured_messages", 0))


def brief(role: str, content: str, digest: str | None) -> Message:
    """A message as a turn reads it: role, text and, for an answer that used tools, its digest."""
    message: Message = {"role": role, "content": content}
    if digest:
        message["digest"] = digest
    return message


def settings_of(row: tuple) -> dict[str, Any]:
    try:
        return jsoncodec.loads(row[6])
    except ValueError as exc:
        raise Damaged(f"conversation {row[1]}: settings damaged ({exc})") from None


def conversation_from_row(row: tuple) -> Conversation:
    conversation: Conversation = {
        "id": row[1],
        "title": row[2],
        "created": row[4],
        "updated": row[5],
        "settings": jsoncodec.loads(row[6]),
        "messages": [],
        "summary": row[7],
        "summarized": row[8],
    }
    if row[3]:
        conversation["title_from_message"] = True
    for key, value in (("totals", row[9]), ("usage", row[10]), ("budget", row[11])):
        if value is not None:
            conversation[key] = jsoncodec.loads(value)
    return conversation


def parse_conversation(raw: bytes) -> dict[str, Any]:
    """A conversation file of earlier versions, or ValueError saying what is wrong."""
    try:
        conversation = jsoncodec.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    except ValueError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(conversation, dict):
        raise ValueError("not a JSON object")
    for key, kind in (("id", str), ("title", str), ("settings", dict), ("messages", list)):
        if not isinstance(conversation.get(key), kind):
            raise ValueError(f"its {key!r} is missing or not a {kind.__name__}")
    return conversation
