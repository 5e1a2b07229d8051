"""`python -m app migrate-db`, run as a user runs it: a household's conversations copied to
another database and back, equal (the export of every conversation, search), idempotent,
refusing to overwrite other data, and failing clearly."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.store.database import DATABASE, Database
from app.store.leases import new_owner
from app.store.migrations import SCHEMA_VERSION, fold
from app.store.transfer import TABLES
from tests.conftest import NO_SEARXNG, run_main
from tests.household import ACCENTED, build, turn

CONVERSATIONS = 300
QUERIES = ("lodz", "ŁÓDŹ", "pierogi", "filling", "renamed 18", "question 7")


def app(*args: str, data_dir: Path, url: str = "") -> subprocess.CompletedProcess[str]:
    """`python -m app ...` as a user runs it (in this process: what the command does is the
    point, not its start), the service configured with DATA_DIR (and DATABASE_URL when
    given)."""
    return run_main(*args, searxng_url=NO_SEARXNG, DATA_DIR=str(data_dir), DATABASE_URL=url)


def migrate(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return app("migrate-db", *args, data_dir=data_dir)


def export(where: Path | str) -> list[dict[str, object]]:
    """Every conversation as `export --all --json` prints it, from a DATA_DIR or a URL."""
    if isinstance(where, Path):
        run = app("export", "--all", "--json", data_dir=where)
    else:
        run = app("export", "--all", "--json", data_dir=Path("/nonexistent"), url=where)
    assert run.returncode == 0, run.stderr
    exported: list[dict[str, object]] = json.loads(run.stdout)
    return exported


def searched(where: Path | str) -> dict[str, list[str]]:
    database = Database(where)
    try:
        return {query: [e["id"] for e in database.list(query)] for query in QUERIES}
    finally:
        database.close()


def rows(where: Path | str, table: str) -> list[tuple[object, ...]]:
    """A table's rows, in its first column's order, from chat.db or PostgreSQL."""
    database = Database(where)
    try:
        found = database.db.execute(f"SELECT * FROM {table}").fetchall()
    finally:
        database.close()
    return sorted((tuple(row) for row in found), key=lambda row: row[0])


@pytest.fixture(scope="module")
def household(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DATA_DIR with a few hundred conversations, built once."""
    data_dir = tmp_path_factory.mktemp("household")
    database = Database(data_dir / DATABASE)
    build(database, CONVERSATIONS)
    database.close()
    return data_dir


@pytest.fixture
def home(household: Path, tmp_path: Path) -> Path:
    """A copy of the household's DATA_DIR, for one test to change."""
    data_dir = tmp_path / "home"
    data_dir.mkdir()
    shutil.copy(household / DATABASE, data_dir / DATABASE)
    return data_dir


def test_the_transfer_knows_every_table_of_the_schema(tmp_path):
    """A table a migration adds must be copied (or named as not copied, like leases)."""
    database = Database(tmp_path / DATABASE)
    schema = {
        name: [column for _, column, *_ in database.db.execute(f"PRAGMA table_info({name})")]
        for (name,) in database.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE "
            "'CREATE VIRTUAL TABLE%' AND name NOT LIKE '%words_%'"
        )
    }
    database.close()
    copied = {table.name: list(table.columns) for table in TABLES}
    assert schema.pop("leases")
    assert schema.pop("search_turn") and schema.pop("search_waiters")
    assert schema.pop("turn_runs") and schema.pop("turn_events")
    assert schema == copied


def test_sqlite_round_trip_keeps_every_conversation_and_search(home, tmp_path):
    middle, back = tmp_path / "middle", tmp_path / "back"
    middle.mkdir()
    back.mkdir()
    there = migrate("--to", str(middle), data_dir=home)
    assert there.returncode == 0, there.stderr
    assert f"conversations {CONVERSATIONS:,} = {CONVERSATIONS:,}" in there.stdout
    assert "verified" in there.stdout
    again = migrate("--from", f"sqlite:///{middle / DATABASE}", "--to", str(back), data_dir=home)
    assert again.returncode == 0, again.stderr

    original = export(home)
    assert len(original) == CONVERSATIONS
    assert export(back) == original
    assert any(c["title"] == ACCENTED for c in original)
    assert any("versions" in m for c in original for m in c["messages"])
    found = searched(back / DATABASE)
    assert found == searched(home / DATABASE)
    assert [e for e in found["lodz"]] == [original[0]["id"]]
    kept = (
        "search_cache",
        "search_queries",
        "added_models",
        "tool_refusals",
        "turn_versions",
        "users",
    )
    for table in kept:
        assert rows(back / DATABASE, table) == rows(home / DATABASE, table), table
    assert rows(home / DATABASE, "leases")  # the dead turn's, not carried over
    assert rows(back / DATABASE, "leases") == []


def test_round_trip_through_postgresql_keeps_every_conversation_and_search(
    home, postgres_url, tmp_path
):
    there = migrate("--to", postgres_url, data_dir=home)
    assert there.returncode == 0, there.stderr
    original = export(home)
    messages = sum(len(c["messages"]) for c in original)  # type: ignore[arg-type]
    assert f"conversations {CONVERSATIONS:,} = {CONVERSATIONS:,}" in there.stdout
    assert f"messages {messages:,} = {messages:,}" in there.stdout
    assert "search_cache 25 = 25" in there.stdout
    assert "users 2 = 2" in there.stdout
    assert export(postgres_url) == original
    assert searched(postgres_url) == searched(home / DATABASE)
    assert rows(postgres_url, "leases") == []

    back = tmp_path / "back"
    back.mkdir()
    again = migrate("--from", postgres_url, "--to", str(back), data_dir=home)
    assert again.returncode == 0, again.stderr
    assert export(back) == original
    found = searched(back / DATABASE)
    assert found == searched(home / DATABASE)
    assert found["lodz"] == [original[0]["id"]]
    for table in TABLES:
        assert rows(back / DATABASE, table.name) == rows(home / DATABASE, table.name), table


def test_the_service_goes_on_in_postgresql_after_the_copy(home, postgres_url):
    """New conversations, messages and versions get ids after the copied ones."""
    assert migrate("--to", postgres_url, data_dir=home).returncode == 0
    database = Database(postgres_url)
    try:
        made = database.create("After the move", {"model": "model-a"})
        turn(database, made["id"], 1000, "A first question in PostgreSQL", 1)
        turn(database, made["id"], 1000, None, 2)
        assert [m["role"] for m in database.load(made["id"])["messages"]] == ["user", "assistant"]
        assert [e["id"] for e in database.list("first question postgresql")] == [made["id"]]
    finally:
        database.close()


def test_the_default_source_is_the_configured_database(home, postgres_url, tmp_path):
    assert migrate("--to", postgres_url, data_dir=home).returncode == 0
    back = app("migrate-db", "--to", str(tmp_path), data_dir=home, url=postgres_url)
    assert back.returncode == 0, back.stderr
    assert export(tmp_path) == export(home)


def test_an_unreachable_server_is_named(home):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    failed = migrate("--to", f"postgresql://chat:secret@127.0.0.1:{port}/chat", data_dir=home)
    assert failed.returncode == 1
    assert f"error: cannot reach PostgreSQL at 127.0.0.1:{port}/chat" in failed.stderr
    assert "secret" not in failed.stderr + failed.stdout


def test_a_database_is_never_copied_into_itself(home, postgres_url, tmp_path):
    """However it is spelled: a copy into itself would wait on its own write lock."""
    (tmp_path / "link").symlink_to(home)
    same_file = migrate("--to", str(tmp_path / "link"), data_dir=home)
    assert same_file.returncode == 1
    assert "the source and the target are the same" in same_file.stderr
    assert migrate("--to", postgres_url, data_dir=home).returncode == 0
    spelled = f"{postgres_url}?application_name=another"
    same_server = migrate("--from", postgres_url, "--to", spelled, data_dir=home)
    assert same_server.returncode == 1
    assert "the source and the target are the same" in same_server.stderr


def test_a_newer_postgresql_target_is_refused(home, postgres_url):
    database = Database(postgres_url)
    with database.write():
        database.db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    database.close()
    failed = migrate("--to", postgres_url, data_dir=home)
    assert failed.returncode == 1
    assert "newer version of this service" in failed.stderr


@dataclass(frozen=True)
class Target:
    """A target as the command names it, and where the tests read it."""

    named: str
    """--to's argument."""
    store: Path | str
    """chat.db's path, or the URL."""
    exported: Path | str
    """For export(): a DATA_DIR, or the URL."""


@pytest.fixture
def target(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if backend == "postgresql":
        url: str = request.getfixturevalue("postgres_url")
        return Target(url, url, url)
    data_dir = tmp_path / "target"
    data_dir.mkdir()
    return Target(str(data_dir), data_dir / DATABASE, data_dir)


def test_running_it_twice_changes_nothing(home, target):
    first = migrate("--to", target.named, data_dir=home)
    assert first.returncode == 0, first.stderr
    copied = {table.name: rows(target.store, table.name) for table in TABLES}
    second = migrate("--to", target.named, data_dir=home)
    assert second.returncode == 0, second.stderr
    assert "already holds the same data: nothing written" in second.stdout
    assert f"messages {len(copied['messages']):,} = {len(copied['messages']):,}" in second.stdout
    assert {table.name: rows(target.store, table.name) for table in TABLES} == copied


def test_a_target_with_other_data_is_refused_and_kept_unless_replaced(home, target):
    theirs = Database(target.store)
    build(theirs, 3)
    theirs.close()
    kept = export(target.exported)

    refused = migrate("--to", target.named, data_dir=home)
    assert refused.returncode == 2
    assert "holds other data" in refused.stderr
    assert "--replace" in refused.stderr
    assert f"conversations {CONVERSATIONS:,} != 3" in refused.stderr
    assert export(target.exported) == kept

    replaced = migrate("--to", target.named, "--replace", data_dir=home)
    assert replaced.returncode == 0, replaced.stderr
    assert "replaced what it held" in replaced.stdout
    assert export(target.exported) == export(home)
    assert rows(target.store, "leases") == []  # the other data's dead turn went with it


def test_a_copy_that_differs_from_the_source_is_rolled_back(home, tmp_path):
    """A target that changes what it is given (here a trigger of its own; a server's
    coercion alike) fails the verification: nothing of the copy stays."""
    database = Database(tmp_path / DATABASE)
    database.db.execute(
        "CREATE TRIGGER shout AFTER INSERT ON messages WHEN new.rowid = 7 BEGIN "
        "UPDATE messages SET content = upper(content) WHERE rowid = new.rowid; END"
    )
    database.close()
    failed = migrate("--to", str(tmp_path), data_dir=home)
    assert failed.returncode == 1
    assert "the copy does not match the source" in failed.stderr
    assert "messages: 1 row differs (rowid 7)" in failed.stderr
    assert "rolled back, nothing written" in failed.stderr
    assert all(rows(tmp_path / DATABASE, table.name) == [] for table in TABLES)


def test_a_running_turn_on_the_source_is_refused(home, tmp_path):
    database = Database(home / DATABASE)
    running = database.ids()[5]
    assert database.begin_turn(running, f"{os.uname().nodename}:{os.getpid()}:1", "hi", "m")
    database.close()
    refused = migrate("--to", str(tmp_path), data_dir=home)
    assert refused.returncode == 2
    assert f"a turn is running in conversation {running}" in refused.stderr
    assert not (tmp_path / DATABASE).exists()  # the target it made is gone again


def test_a_running_turn_on_the_target_is_not_replaced(home, tmp_path):
    theirs = Database(tmp_path / DATABASE)
    running = build(theirs, 3)[1]
    assert theirs.begin_turn(running, f"{os.uname().nodename}:{os.getpid()}:1", "hi", "m")
    theirs.close()
    kept = export(tmp_path)
    refused = migrate("--to", str(tmp_path), "--replace", data_dir=home)
    assert refused.returncode == 2
    assert f"a turn is running in conversation {running} on {tmp_path / DATABASE}" in refused.stderr
    assert export(tmp_path) == kept


def test_a_newer_target_is_refused(home, tmp_path):
    with sqlite3.connect(tmp_path / DATABASE) as newer:
        newer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    failed = migrate("--to", str(tmp_path), data_dir=home)
    assert failed.returncode == 1
    assert "newer version of this service" in failed.stderr


def test_a_damaged_source_is_refused(tmp_path):
    (tmp_path / DATABASE).write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    failed = migrate("--to", str(tmp_path / "copy.db"), data_dir=tmp_path)
    assert failed.returncode == 1
    assert "damaged" in failed.stderr
    assert not (tmp_path / "copy.db").exists()


def test_a_missing_source_or_unknown_scheme_is_named(tmp_path):
    missing = migrate("--to", str(tmp_path / "copy.db"), data_dir=tmp_path / "nothing")
    assert missing.returncode == 1
    assert f"no database at {tmp_path / 'nothing' / DATABASE}" in missing.stderr
    unknown = migrate("--to", "mysql://db/chat", data_dir=tmp_path)
    assert unknown.returncode == 1
    assert "give postgresql://" in unknown.stderr


def test_an_older_sqlite_holding_nul_moves_without_it(tmp_path, postgres_url):
    """Earlier versions kept a NUL on SQLite (in text, and as JSON's escape), which
    PostgreSQL refuses: the copy drops it, as the store now does on both backends, and the
    moved conversation is served, a regenerate (which reads the answer's status) too."""
    home, back = tmp_path / "home", tmp_path / "back"
    home.mkdir()
    back.mkdir()
    database = Database(home / DATABASE)
    made = database.create("Pierogi", {"model": "model-a"})
    turn(database, made["id"], 1, "How long do pierogi boil?", 1)
    database.close()
    with closing(sqlite3.connect(home / DATABASE)) as old, old:
        old.create_function("fold", 1, fold)  # the search index's triggers call it
        old.execute("UPDATE conversations SET title = ?", ("Pie\x00rogi",))
        old.execute("UPDATE messages SET content = content || ?", ("\x00",))
        (details,) = old.execute("SELECT details FROM messages WHERE role = 'assistant'").fetchone()
        noted = json.dumps({**json.loads(details), "note\x00": "from a page\x00"})
        old.execute("UPDATE messages SET details = ? WHERE role = 'assistant'", (noted,))
    without = json.loads(json.dumps(export(home)).replace("\\u0000", ""))
    assert without != export(home)

    moved = migrate("--to", postgres_url, data_dir=home)
    assert moved.returncode == 0, moved.stderr
    assert "verified" in moved.stdout
    assert export(postgres_url) == without
    assert migrate("--to", str(back), data_dir=home).returncode == 0
    assert export(back) == without
    database = Database(postgres_url)
    try:
        assert database.load(made["id"])["messages"][-1]["note"] == "from a page"
        assert database.begin_turn(made["id"], new_owner(), None, "model-a") is not None
        assert database.load(made["id"])["messages"][-1]["role"] == "user"
    finally:
        database.close()
