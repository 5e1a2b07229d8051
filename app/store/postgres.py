"""PostgreSQL's side of the dialect (dialect.py): psycopg 3 with its connection pool, the
queries' `?` placeholders translated once, the write transaction's lock, the schema version
in a table, the database's clock, full-text search through tsvector. Imported only when
DATABASE_URL names PostgreSQL. See docs/architecture.md, "Two backends".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from app.store.dialect import Dialect, Session
from app.store.errors import SchemaRefused, Unavailable, Unreachable
from app.store.migrations import MIGRATIONS, SCHEMA_VERSION
from app.store.pg_reasons import cannot_connect, stopped_answering

CONNECT_TIMEOUT = 5
"""Seconds to wait for the server to answer a new connection: an unreachable one fails in
seconds, not minutes."""
POOL_WAIT = 10.0
"""Seconds a query waits for a connection from the pool (the pool replaces broken ones)."""
PING_WAIT = 2
PROBE_SECONDS = 1.0
"""While the server cannot be reached in time (a connection attempt that timed out), at
most one attempt per this many seconds; the queries between fail at once. A refused
connection costs a millisecond: the next query tries again (PostgresSession.revive)."""
WRITE_LOCK = 0x6368_6174  # "chat": the advisory lock every write transaction takes
QUERY = (
    "to_tsquery('simple', regexp_replace(nullif(trim(search_text(?)), ''), ' +', ':* & ', 'g')"
    " || ':*')"
)
"""The search's words as a tsquery: each a prefix, all required; none matches nothing."""
LIBRARY_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)
"""The server gone, the network down, no connection to be had: Unavailable."""


@lru_cache(maxsize=1024)
def placeholders(sql: str) -> str:
    """`?` as psycopg spells it (`%s`); a literal % doubled (none of the queries has one)."""
    return sql.replace("%", "%%").replace("?", "%s")


class Rows:
    """A query's result, read at once (its connection may be back in the pool)."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self.rowcount = cursor.rowcount
        self.rows: list[Any] = cursor.fetchall() if cursor.description is not None else []

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return self.rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)


class ServerGone(BaseException):
    """Raised by the pool's connection check when the server cannot be reached either, to
    leave psycopg_pool's wait for a connection (which would last POOL_WAIT) at once: the
    pool lets only a BaseException through. Caught as Unavailable."""


def new_pool(
    url: str, check: Callable[[psycopg.Connection[Any]], None]
) -> ConnectionPool[psycopg.Connection[Any]]:
    return ConnectionPool(
        url,
        min_size=1,
        max_size=4,
        # A connection the server dropped (it restarted, it is down) is found at checkout.
        check=check,
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT},
        timeout=POOL_WAIT,
        name="store",
        open=True,
    )


class PostgresSession:
    """`self.db` on PostgreSQL: inside a write transaction, its connection; outside, each
    query on a connection of the pool, in autocommit (as SQLite's reads outside one)."""

    def __init__(self, url: str, where: str) -> None:
        self.url = url
        self.where = where
        self.pool = new_pool(url, self.check)
        self.connection: psycopg.Connection[Any] | None = None
        self.down: str | None = None
        """Why the last query failed, when the server or the network went away."""
        self.next_probe = 0.0
        """When `revive` may try to reach the server again."""

    @property
    def in_transaction(self) -> bool:
        return self.connection is not None

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Rows:
        with self.unavailable():
            if self.connection is not None:
                return Rows(self.connection.execute(placeholders(sql), parameters))
            self.revive()
            with self.pool.connection() as connection:
                return Rows(connection.execute(placeholders(sql), parameters))

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Rows:
        with self.unavailable():
            if self.connection is not None:
                cursor = self.connection.cursor()
                cursor.executemany(placeholders(sql), parameters)
                return Rows(cursor)
            self.revive()
            with self.pool.connection() as connection:
                cursor = connection.cursor()
                cursor.executemany(placeholders(sql), parameters)
                return Rows(cursor)

    def script(self, sql: str) -> None:
        """Statements sent whole (a migration), in the transaction: without parameters
        psycopg sends a simple query, which may hold several statements."""
        assert self.connection is not None, "a migration runs in a write transaction"
        with self.unavailable():
            self.connection.execute(sql.encode())

    @contextmanager
    def transaction(self, begin: str) -> Iterator[None]:
        """`begin`: the statements that open it, sent in one trip."""
        with self.unavailable():
            self.revive()
            connection = self.pool.getconn()
        try:
            with self.unavailable():
                connection.execute(begin.encode())
            self.connection = connection
            try:
                yield
                with self.unavailable():
                    connection.execute("COMMIT")
            except BaseException:
                if not connection.broken:
                    with self.unavailable():
                        connection.execute("ROLLBACK")
                raise
        finally:
            self.connection = None
            self.pool.putconn(connection)  # a broken one is discarded, replaced later

    @contextmanager
    def unavailable(self) -> Iterator[None]:
        """psycopg's errors of the server or the network, as the store's one error."""
        try:
            yield
        except (*LIBRARY_ERRORS, ServerGone) as exc:
            # No SQLSTATE (a connection lost), class 08 (connection exception) or 57 (the
            # server shutting down): gone. A deadlock or a timeout is an answer.
            sqlstate = getattr(exc, "sqlstate", None) or ""
            if sqlstate[:2] in ("", "08", "57"):
                self.down = str(exc)
            raise Unavailable(stopped_answering(self.where, str(exc))) from None

    def revive(self) -> None:
        """After a failure of the server or the network: one direct connection says at
        once whether it is back (a refused one fails in a millisecond, where the pool
        would wait POOL_WAIT for each query, one after the other in the storage thread;
        see PROBE_SECONDS). Back: a new pool, since the old one waits out its
        reconnection backoff, which doubles to minutes; the first query after the server
        is back works."""
        if self.down is None:
            return
        if time.monotonic() < self.next_probe:
            raise psycopg.OperationalError(self.down)
        started = time.monotonic()
        try:
            psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT).close()
        except psycopg.Error:
            slow = time.monotonic() - started > PROBE_SECONDS / 2
            self.next_probe = time.monotonic() + PROBE_SECONDS if slow else 0.0
            raise
        old, self.pool, self.down = self.pool, new_pool(self.url, self.check), None
        old.close(timeout=1.0)

    def check(self, connection: psycopg.Connection[Any]) -> None:
        """A connection of the pool, before it is handed out: a broken one is replaced
        when the server answers a new one, else ServerGone."""
        try:
            ConnectionPool.check_connection(connection)
        except psycopg.Error:
            try:
                psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT).close()
            except psycopg.Error as exc:
                raise ServerGone(str(exc)) from None
            raise

    def close(self) -> None:
        self.pool.close()


def server_of(url: str) -> str:
    """host:port/database of a URL, never its password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "DATABASE_URL (not a valid PostgreSQL URL)"
    host = parts.get("host") or "localhost"
    return f"{host}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"


class PostgresDialect(Dialect):
    """One PostgreSQL shared by every replica. Writers go one at a time, as on SQLite: each
    write transaction first takes one advisory lock, so under READ COMMITTED a turn's start
    (is the lease free? take it) means what it means on SQLite, across machines."""

    backend = "postgresql"
    # clock_timestamp(), not now(): now() is when the transaction began, before its wait
    # for the write lock.
    clock = "extract(epoch FROM clock_timestamp())::double precision"
    # Words are split as FTS5's unicode61 splits them: search_text() turns whatever is not
    # a letter or digit into a space before PostgreSQL's parser sees the text (which would
    # otherwise keep an e-mail address, a URL or 3.14 as one token); each word a prefix.
    search = (
        "SELECT rowid FROM conversations"
        f" WHERE to_tsvector('simple', search_text(title)) @@ {QUERY}"
        " UNION SELECT conversation FROM messages"
        f" WHERE to_tsvector('simple', search_text(content)) @@ {QUERY}"
    )

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = server_of(url)
        super().__init__()
        self.session: PostgresSession = self.db  # type: ignore[assignment]  # connect()'s

    def connect(self) -> Session:
        try:  # one connection first: an unreachable server is one clear error, at once
            psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT).close()
        except psycopg.Error as exc:
            raise Unreachable(cannot_connect(self.where, str(exc), self.url)) from None
        return PostgresSession(self.url, self.where)

    def describe(self) -> str:
        return f"PostgreSQL at {self.where}"

    def search_parameter(self, words: list[str]) -> str:
        # Folded, unaccented and lowered by search_text() as the indexed text was, then
        # each word a prefix (`word:*`), all of them required.
        return " ".join(words)

    @contextmanager
    def write(self, *, durable: bool = False) -> Iterator[None]:
        # `durable` is PostgreSQL's default already (synchronous_commit = on).
        with self.session.transaction(f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})"):
            yield

    def schema_version(self) -> int:
        if self.session.execute("SELECT to_regclass('schema_version')").fetchone()[0] is None:
            return 0
        version: int = self.session.execute("SELECT version FROM schema_version").fetchone()[0]
        return version

    def run_migrations(self, version: int) -> None:
        for step in MIGRATIONS[version:]:
            try:
                self.session.script(step.postgresql)
            except psycopg.Error as exc:  # e.g. not allowed to create the extension
                raise SchemaRefused(
                    f"PostgreSQL at {self.where} refused the schema ({exc}): the user of "
                    "DATABASE_URL must own the database and may create the unaccent extension"
                ) from None
        self.session.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))

    def ping(self) -> bool:
        try:
            if self.session.down is not None:  # the pool may be in its reconnection backoff
                psycopg.connect(self.url, connect_timeout=PING_WAIT).close()
                return True
            with self.session.pool.connection(timeout=PING_WAIT) as connection:
                connection.execute("SELECT 1")
        except (psycopg.Error, PoolTimeout, ServerGone):
            return False
        return True

    def after_copy(self) -> None:
        # An identity's sequence knows nothing of ids given explicitly: each starts again
        # after the largest copied. The GIN indexes took each row as it came. (No ANALYZE:
        # autovacuum's comes soon enough, and over the search indexes' expressions it took
        # 2.5 s for 3,000 conversations, longer than the rest of the copy.)
        identities = self.session.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND is_identity = 'YES'"
        ).fetchall()
        for table, column in identities:
            self.session.execute(
                f"SELECT setval(pg_get_serial_sequence(?, ?), coalesce(max({column}), 0) + 1, "
                f"false) FROM {table}",
                (table, column),
            )

    def identity(self) -> str:
        # A cluster is its port and its start (its address depends on the route taken); a
        # database, its oid within it.
        row = self.session.execute(
            "SELECT inet_server_port(), pg_postmaster_start_time(), oid "
            "FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        return "postgresql:" + "/".join(str(part) for part in row)
