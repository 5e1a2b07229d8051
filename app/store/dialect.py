"""Every difference between the two backends, SQLite (DATA_DIR/chat.db) and PostgreSQL
(DATABASE_URL), in one place: connecting, the placeholders, the write transaction, the
schema's version, the database's clock, the full-text search query, a health ping. The
queries above use `?` placeholders and run unchanged on both (docs/architecture.md, "Two
backends").
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from app.store.errors import Damaged
from app.store.files import private_file
from app.store.migrations import MIGRATIONS, SCHEMA_VERSION, fold, split_script

BUSY_TIMEOUT_MS = 10_000
WORD = re.compile(r"[^\W_]+")
"""A word as both indexes split text: letters and digits; anything else separates."""


class Cursor(Protocol):
    """What a query's result offers the queries: sqlite3's cursor, or Rows."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Session(Protocol):
    """`self.db` of the query classes: sqlite3's connection, or PostgresSession."""

    @property
    def in_transaction(self) -> bool: ...
    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...
    def close(self) -> None: ...


def search_words(query: str) -> list[str]:
    """The words of a search, folded as the indexes hold them (one split for both)."""
    return WORD.findall(fold(query))


class Dialect:
    """What differs; SqliteDialect and PostgresDialect say how."""

    backend: str
    clock: str
    """SQL for the database's time now, in seconds since 1970 (leases expire by it)."""
    search: str
    """SQL selecting the rowid of each conversation whose title or messages hold words
    starting with every word of the search; two parameters (see `search_parameter`)."""

    def __init__(self) -> None:
        self.db: Session = self.connect()

    def connect(self) -> Session:
        raise NotImplementedError

    def describe(self) -> str:
        """Where the data is, for messages (never a password)."""
        raise NotImplementedError

    def search_parameter(self, words: list[str]) -> str:
        raise NotImplementedError

    def write(self, *, durable: bool = False) -> AbstractContextManager[None]:
        """One transaction holding the write lock from its start (`durable`: its commit
        survives a power cut, not only a crash)."""
        raise NotImplementedError

    def schema_version(self) -> int:
        raise NotImplementedError

    def run_migrations(self, version: int) -> None:
        """From `version` to SCHEMA_VERSION, in the caller's write transaction."""
        raise NotImplementedError

    def ping(self) -> bool:
        """Whether the database answers now; any thread may ask, and it is quick."""
        raise NotImplementedError

    def close(self) -> None:
        self.db.close()

    def migrate(self) -> None:
        with self.write():
            version = self.schema_version()
            if version > SCHEMA_VERSION:
                raise Damaged(
                    f"{self.describe()} was written by a newer version of this service "
                    f"(schema {version}, this one knows {SCHEMA_VERSION}): update the service"
                )
            if version < SCHEMA_VERSION:
                self.run_migrations(version)


class SqliteDialect(Dialect):
    """chat.db: WAL, so other processes on DATA_DIR read while one writes; writers take
    the lock up front (BEGIN IMMEDIATE)."""

    backend = "sqlite"
    # julianday('now') is the database's clock (SQLite's own), to the millisecond.
    clock = "((julianday('now') - 2440587.5) * 86400.0)"
    search = (
        "SELECT rowid FROM title_words WHERE title_words MATCH ?"
        " UNION SELECT m.conversation FROM message_words"
        " JOIN messages m ON m.rowid = message_words.rowid WHERE message_words MATCH ?"
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__()

    def connect(self) -> Session:
        private_file(self.path)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode survives a crash of the process; a turn's outcome asks for
        # FULL (see `write`), which survives a power cut too.
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA foreign_keys = ON")
        db.create_function("fold", 1, fold, deterministic=True)
        return db

    def describe(self) -> str:
        return str(self.path)

    def search_parameter(self, words: list[str]) -> str:
        return " ".join('"' + word.replace('"', '""') + '"*' for word in words)

    @contextmanager
    def write(self, *, durable: bool = False) -> Iterator[None]:
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

    def schema_version(self) -> int:
        version: int = self.db.execute("PRAGMA user_version").fetchone()[0]
        return version

    def run_migrations(self, version: int) -> None:
        for step in MIGRATIONS[version:]:
            for statement in split_script(step.sqlite):
                self.db.execute(statement)
        self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def ping(self) -> bool:
        try:
            with sqlite3.connect(self.path, timeout=1) as probe:
                probe.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone()
            probe.close()
        except sqlite3.Error:
            return False
        return True


def dialect_for(target: Path | str) -> Dialect:
    """SQLite for a path, PostgreSQL for a postgresql:// URL."""
    if isinstance(target, Path):
        return SqliteDialect(target)
    # psycopg (a tenth of a second to import) only when it is used.
    from app.store.postgres import PostgresDialect

    dialect: Dialect = PostgresDialect(target)
    return dialect
