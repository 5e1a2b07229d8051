"""`python -m app migrate-db`: every conversation and what goes with it copied from one
store to another (SQLite to PostgreSQL, or back), table by table over the store's
connection, in one transaction on the target, then verified row by row before that
transaction commits (docs/architecture.md, "Moving to another database").

Copied: every table of the schema but the leases (a running turn cannot move: a source
with one is refused), with their ids, so conversation ids, message positions, versions,
settings, the search cache and its counts, the picker's models, the tool refusals and the
household's users are the same on the target. Idempotent: a target that already holds the
same rows is left as it is; one that holds other rows is refused unless told to replace them.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.errors import ServiceError
from app.store.database import DATABASE, Database
from app.store.nul import json_without_nul, without_nul


class TransferFailed(ServiceError):
    """A store that cannot be opened or read, or a copy that did not verify: nothing was
    written to the target."""

    status = 500


class TransferRefused(TransferFailed):
    """The target holds other data (and no --replace), or a turn runs on the source."""

    status = 409


Row = tuple[object, ...]


@dataclass(frozen=True)
class Table:
    """A table as the transfer copies it: its columns, the first its key."""

    name: str
    columns: tuple[str, ...]
    json: frozenset[str] = frozenset()
    """The columns holding JSON the store wrote (json_text)."""

    @property
    def key(self) -> str:
        return self.columns[0]

    def as_written_now(self, row: Row) -> Row:
        """The row without the NULs an older version stored (nul.py): on the target as the
        store writes it today, the source's digest taken of the same."""
        return tuple(
            value if not isinstance(value, str) else text_now(value, column in self.json)
            for column, value in zip(self.columns, row, strict=True)
        )


def text_now(text: str, json: bool) -> str:
    return json_without_nul(without_nul(text)) if json else without_nul(text)


# Parents before children (a message names its conversation's rowid); every table of the
# schema but leases, the search plan's turn (search_turn, search_waiters: the replicas'
# moment, not data), the turns' kept events (turn_runs, turn_events: a reconnection's
# moment; the answers themselves are in messages) and the search index, which the
# target's triggers fill (tests/test_migrate_db.py checks the list against the schema).
TABLES = (
    Table(
        "conversations",
        (
            "rowid",
            "id",
            "title",
            "title_from_message",
            "created",
            "updated",
            "settings",
            "summary",
            "summarized",
            "totals",
            "usage",
            "budget",
            "owner",
        ),
        frozenset(("settings", "totals", "usage", "budget")),
    ),
    Table(
        "messages",
        ("rowid", "conversation", "position", "role", "content", "details", "digest"),
        frozenset(("details",)),
    ),
    Table(
        "turn_versions",
        ("rowid", "conversation", "position", "slot", "tail"),
        frozenset(("tail",)),
    ),
    Table("added_models", ("id", "person", "position", "model")),
    Table("tool_refusals", ("model", "at", "reason")),
    Table("search_queries", ("day", "queries")),
    Table("search_cache", ("key", "response", "stored_at", "used")),
    Table("sessions", ("key", "expires", "person", "last_used")),
    Table(
        "users",
        ("rowid", "name", "display_name", "email", "admin", "disabled", "created", "password"),
    ),
    Table("api_tokens", ("key", "id", "person", "label", "created", "last_used")),
    Table("search_limits", ("person", "daily", "monthly")),
    Table("search_spent", ("id", "person", "day", "queries")),
)
PAGE_ROWS = 500
"""Rows read (and written) at a time: a large database is never in memory at once."""

Digests = dict[str, dict[object, bytes]]
"""By table, by key: a digest of the row's values."""


@dataclass(frozen=True)
class Location:
    """A store named on the command line: a SQLite file or a PostgreSQL URL."""

    url: str
    """postgresql://... or sqlite:///<path> (SQLAlchemy's form: four slashes for an
    absolute path)."""

    @property
    def path(self) -> Path | None:
        """The SQLite file, None for PostgreSQL."""
        if self.url.startswith("sqlite:///"):
            return Path(self.url.removeprefix("sqlite:///"))
        return None

    def shown(self) -> str:
        """For the user: the file, or where the server is (never a password)."""
        if self.path is not None:
            return str(self.path)
        from app.store.postgres import server_of  # psycopg's parser, when it is used

        return f"PostgreSQL at {server_of(self.url)}"


def location(text: str) -> Location:
    """`postgresql://user:password@host:port/database` (or postgres://), `sqlite:///path`,
    or a path: a chat.db file, or a directory holding one (a DATA_DIR)."""
    if text.startswith(("postgresql://", "postgres://")):
        return Location(text)
    if text.startswith("sqlite:///"):
        path = Path(text.removeprefix("sqlite:///"))
    elif "://" in text:
        raise TransferFailed(
            f"not a database this service can use: {text.partition('://')[0]}:// (give "
            "postgresql://..., sqlite:///path/chat.db or a path)"
        )
    else:
        path = Path(text)
    if path.is_dir():
        path = path / DATABASE
    return Location(f"sqlite:///{path.resolve()}")


@dataclass(frozen=True)
class Count:
    table: str
    source: int
    target: int


@dataclass(frozen=True)
class Report:
    """What a transfer did, verified."""

    source: Location
    target: Location
    counts: tuple[Count, ...]
    copied: bool
    """False when the target already held the same rows (nothing written)."""
    replaced: bool
    """Rows the target held were removed first (--replace)."""
    seconds: float

    def lines(self) -> list[str]:
        if self.copied:
            how = "replaced what it held and copied" if self.replaced else "copied"
            head = f"{how} {self.source.shown()} -> {self.target.shown()} in {self.seconds:.1f} s"
        else:
            head = f"{self.target.shown()} already holds the same data: nothing written"
        return [head, counts_line(self.counts), "verified: every row of every table is equal"]


def counts_line(counts: tuple[Count, ...]) -> str:
    return ", ".join(
        f"{c.table} {c.source:,} {'=' if c.source == c.target else '!='} {c.target:,}"
        for c in counts
    )


@contextmanager
def opened(where: Location, *, create: bool) -> Iterator[Database]:
    """The store at `where`, its schema brought up to this version's (as the service does
    at start); neither may be damaged nor newer than this version. A SQLite source must
    exist; a target file made here is removed again if the transfer fails."""
    path = where.path
    if path is None:
        with closing(postgres_store(where)) as store:
            yield store
        return
    existed = path.exists()
    if not create and not path.is_file():
        raise TransferFailed(f"no database at {path} (DATA_DIR, or give --from)")
    if create and not path.parent.is_dir():
        raise TransferFailed(f"no directory {path.parent} to hold {path.name}")
    try:
        with closing(sqlite_store(path)) as store:
            yield store
    except BaseException:
        if not existed:
            for made in (path, *(path.with_name(path.name + end) for end in ("-wal", "-shm"))):
                made.unlink(missing_ok=True)
        raise


def postgres_store(where: Location) -> Database:
    try:
        return Database(where.url)
    except ServiceError as exc:  # unreachable (the message says where), or newer
        raise TransferFailed(str(exc)) from None


def sqlite_store(path: Path) -> Database:
    try:
        store = Database(path)
        checked = store.scalar("PRAGMA quick_check")
    except sqlite3.Error as exc:
        raise TransferFailed(f"{path} is damaged or not a chat database: {exc}") from None
    except ServiceError as exc:
        raise TransferFailed(str(exc)) from None
    if checked != "ok":
        store.close()
        raise TransferFailed(f"{path} is damaged (SQLite's quick_check: {checked})")
    return store


def pages(store: Database, table: Table) -> Iterator[list[Row]]:
    """The table's rows in its key's order, PAGE_ROWS at a time (keyset pagination: each
    page one short query, whatever the table's size), as the store writes them now."""
    columns = ", ".join(table.columns)
    query = f"SELECT {columns} FROM {table.name} ORDER BY {table.key} LIMIT ?"
    rows: list[Row] = store.db.execute(query, (PAGE_ROWS,)).fetchall()
    after = f"SELECT {columns} FROM {table.name} WHERE {table.key} > ? ORDER BY {table.key} LIMIT ?"
    while rows:
        yield [table.as_written_now(row) for row in rows]
        if len(rows) < PAGE_ROWS:
            return
        rows = store.db.execute(after, (rows[-1][0], PAGE_ROWS)).fetchall()


def digest(row: Row) -> bytes:
    """The row's values, as the same on either backend (a flag read as 1 or True)."""
    values = [int(v) if isinstance(v, bool) else v for v in row]
    return hashlib.blake2b(repr(values).encode(), digest_size=16).digest()


def digests(store: Database) -> Digests:
    return {
        table.name: {row[0]: digest(row) for page in pages(store, table) for row in page}
        for table in TABLES
    }


def counted(source: Digests, target: Digests) -> tuple[Count, ...]:
    return tuple(Count(t.name, len(source[t.name]), len(target[t.name])) for t in TABLES)


def refuse_running_turns(store: Database, where: Location) -> None:
    """A turn running on the source would go on writing there after the copy; one running
    on the target would find its conversation replaced."""
    for (conversation,) in store.db.execute("SELECT conversation FROM leases").fetchall():
        if store.held(conversation):
            raise TransferRefused(
                f"a turn is running in conversation {conversation} on {where.shown()}: "
                "stop the service, then migrate"
            )


def copy_rows(source: Database, target: Database) -> None:
    for table in TABLES:
        marks = ", ".join("?" for _ in table.columns)
        insert = f"INSERT INTO {table.name} ({', '.join(table.columns)}) VALUES ({marks})"
        for page in pages(source, table):
            target.db.executemany(insert, page)


def clear(store: Database) -> None:
    """Every row the transfer copies, and the leases: children first."""
    for table in reversed(TABLES):
        store.db.execute(f"DELETE FROM {table.name}")
    store.db.execute("DELETE FROM leases")


def mismatch(source: Digests, target: Digests) -> str:
    """Which tables differ and at which keys, for the error."""
    named = []
    for table in TABLES:
        ours, theirs = source[table.name], target[table.name]
        keys = sorted(
            {k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k)}, key=repr
        )
        if keys:
            shown = ", ".join(repr(k) for k in keys[:3]) + (", ..." if len(keys) > 3 else "")
            rows = "1 row differs" if len(keys) == 1 else f"{len(keys):,} rows differ"
            named.append(f"{table.name}: {rows} ({table.key} {shown})")
    return "; ".join(named)


def migrate(source: Location, target: Location, *, replace: bool = False) -> Report:
    """Copy `source` into `target` in one transaction, verified before it commits; a
    target holding other rows is refused unless `replace`. TransferFailed (or
    TransferRefused) says why nothing was written."""
    if source == target:
        raise TransferFailed(f"the source and the target are the same: {source.shown()}")
    started = time.perf_counter()
    try:
        with opened(source, create=False) as origin, opened(target, create=True) as copy:
            if origin.dialect.identity() == copy.dialect.identity():
                raise TransferFailed(f"the source and the target are the same: {source.shown()}")
            # In a write transaction: the source's writers (a service left running) wait,
            # so what is copied and what it is compared with are the same rows.
            with origin.write():
                refuse_running_turns(origin, source)
                wanted = digests(origin)
                with copy.write(durable=True):
                    held = digests(copy)
                    if held == wanted:
                        return Report(source, target, counted(wanted, held), False, False, 0.0)
                    make_room(copy, target, wanted, held, replace=replace)
                    copy_rows(origin, copy)
                    copy.dialect.after_copy()
                    written = digests(copy)
                    verify(wanted, written)
    except Exception as exc:
        if isinstance(exc, TransferFailed) or not isinstance(exc, driver_errors()):
            raise
        raise TransferFailed(f"the copy failed, nothing written: {exc}") from None
    replaced = any(held.values())
    seconds = time.perf_counter() - started
    return Report(source, target, counted(wanted, written), True, replaced, seconds)


def make_room(
    store: Database, target: Location, wanted: Digests, held: Digests, *, replace: bool
) -> None:
    """An empty target is copied into; one with other rows only when told, emptied first."""
    if not any(held.values()):
        return
    refuse_running_turns(store, target)
    if not replace:
        raise TransferRefused(
            f"{target.shown()} holds other data ({counts_line(counted(wanted, held))}; "
            f"{mismatch(wanted, held)}): nothing written; give --replace to replace it "
            "with the source's (what it holds now is lost)"
        )
    clear(store)


def verify(wanted: Digests, written: Digests) -> None:
    """Every row of every table equal to the source's, or the copy is rolled back."""
    if written != wanted:
        raise TransferFailed(
            f"the copy does not match the source ({counts_line(counted(wanted, written))}; "
            f"{mismatch(wanted, written)}): rolled back, nothing written"
        )


def driver_errors() -> tuple[type[Exception], ...]:
    """What the stores raise: the store's own errors, sqlite3's, and psycopg's (those the
    store does not translate, a constraint refused; once PostgreSQL was used)."""
    errors: list[type[Exception]] = [ServiceError, sqlite3.Error]
    if (psycopg := sys.modules.get("psycopg")) is not None:
        errors.append(psycopg.Error)
    return tuple(errors)
