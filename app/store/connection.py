"""The database opened (SQLite's chat.db or PostgreSQL's, see dialect.py), its schema
brought up to date, and what every query shares (the write transaction, reading a
conversation's row, writing a message). See docs/architecture.md, "Two backends".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.store.dialect import Dialect, Session, dialect_for
from app.store.errors import NotFound
from app.store.nul import NulDropped
from app.store.rows import (
    CONVERSATION_COLUMNS,
    ConversationRow,
    Message,
    check_id,
    message_columns,
    now,
)


class Connection:
    """The connection, used by one thread at a time; the queries build on it (Database).
    `target`: chat.db's path, or a postgresql:// URL."""

    def __init__(self, target: Path | str) -> None:
        self.dialect: Dialect = dialect_for(target)
        self.db: Session = NulDropped(self.dialect.db)
        self.path = self.dialect.describe()
        """Where the data is, for messages."""
        try:
            self.dialect.migrate()
        except BaseException:
            self.dialect.close()  # PostgreSQL's pool and its threads too
            raise

    def close(self) -> None:
        self.dialect.close()

    @contextmanager
    def write(self, *, durable: bool = False) -> Iterator[None]:
        """One transaction holding the write lock from its start: writers, from every
        process and every machine sharing the database, go one at a time."""
        with self.dialect.write(durable=durable):
            yield

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
