"""chat.db opened: its pragmas, its schema brought up to date, and what every query shares
(the write transaction, reading a conversation's row, writing a message).

WAL mode lets other processes sharing DATA_DIR read while one writes; writes take the lock
up front (BEGIN IMMEDIATE). See docs/architecture.md.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.store.errors import Damaged, NotFound
from app.store.files import private_file
from app.store.migrations import MIGRATIONS, SCHEMA_VERSION, fold, split_script
from app.store.rows import (
    CONVERSATION_COLUMNS,
    ConversationRow,
    Message,
    check_id,
    message_columns,
    now,
)

BUSY_TIMEOUT_MS = 10_000


class Connection:
    """The connection, used by one thread at a time; the queries build on it (Database)."""

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
            version = self.scalar("PRAGMA user_version")
            if version > SCHEMA_VERSION:
                raise Damaged(
                    f"{self.path} was written by a newer version of this service (schema "
                    f"{version}, this one knows {SCHEMA_VERSION}): update the service"
                )
            for script in MIGRATIONS[version:]:
                for statement in split_script(script):
                    self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def scalar(self, query: str, parameters: Sequence[object] = ()) -> Any:
        """The one column of the query's first row; None when there is no row."""
        found = self.db.execute(query, parameters).fetchone()
        if found is None:
            return None
        (value,) = found
        return value

    def row(self, conversation_id: str) -> ConversationRow:
        """The conversation's row; InvalidId before any query, NotFound if there is none."""
        found = self.db.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?",
            (check_id(conversation_id),),
        ).fetchone()
        if found is None:
            raise NotFound(f"no conversation {conversation_id}")
        return ConversationRow._make(found)

    def touch(self, rowid: int) -> None:
        self.db.execute("UPDATE conversations SET updated = ? WHERE rowid = ?", (now(), rowid))

    def insert(self, rowid: int, position: int, message: Message) -> None:
        self.db.execute(
            "INSERT INTO messages (conversation, position, role, content, details, digest) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (rowid, position, *message_columns(message)),
        )
