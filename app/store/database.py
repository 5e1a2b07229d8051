"""Conversations in SQLite (DATA_DIR/chat.db): a row per conversation, a row per message,
a row per answer version set aside (a turn a regenerate or an edit replaced), a lease row
per conversation a turn holds. See docs/architecture.md.

`Database` is every query, built up by layer: the connection (connection.py), the leases,
the versions, the conversations, the turn's writes, its kept events (turn_events.py); the
picker's models and the import of the JSON files of earlier versions and the search
cache's and the search turn's rows beside them; the household's users (users.py). One
thread at a time uses it: the service through `Storage` (storage.py), the CLI's export and
users commands and the benchmarks directly.
"""

from __future__ import annotations

from pathlib import Path

from app.store.dialect import dialect_for
from app.store.late import LateOutcomes
from app.store.legacy import LegacyImport
from app.store.search_cache import SearchCacheRows
from app.store.search_pace import SearchPaceRows
from app.store.search_shares import SearchShareRows
from app.store.searches import SearchCounts
from app.store.sessions import SessionRows
from app.store.turn_events import TurnEventRows
from app.store.users import UserRows

DATABASE = "chat.db"
"""Its file name in DATA_DIR."""


class Database(
    LateOutcomes,
    LegacyImport,
    SearchCounts,
    SearchCacheRows,
    SearchPaceRows,
    SearchShareRows,
    SessionRows,
    TurnEventRows,
    UserRows,
):
    """chat.db opened (its schema brought up to date), with every query."""


def stored(data_dir: Path, database_url: str) -> Path | str | None:
    """Where a command finds the database without creating it: DATABASE_URL's (always
    there to ask), or DATA_DIR's chat.db when the service made one, else None."""
    if database_url:
        return database_url
    path = data_dir / DATABASE
    return path if path.exists() else None


def reach(database_url: str) -> None:
    """DATABASE_URL's server answers and lets the service in, checked before a command
    starts anything; else Unreachable, one line naming host:port/database and what to
    check (SQLite's file is made or found when opened)."""
    if database_url:
        dialect_for(database_url).close()
