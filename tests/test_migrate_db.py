"""`python -m app migrate-db`, run as a user runs it: a household's conversations copied to
another database and back, equal (the export of every conversation, search), idempotent,
refusing to overwrite other data, and failing clearly."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.store.database import DATABASE, Database
from app.store.migrations import SCHEMA_VERSION
from app.store.transfer import TABLES
from tests.conftest import ROOT
from tests.household import ACCENTED, build

CONVERSATIONS = 300
QUERIES = ("lodz", "ŁÓDŹ", "pierogi", "filling", "renamed 18", "question 7")


def migrate(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "migrate-db", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "DATA_DIR": str(data_dir)},
        timeout=300,
    )


def export(data_dir: Path) -> list[dict[str, object]]:
    run = subprocess.run(
        [sys.executable, "-m", "app", "export", "--all", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "DATA_DIR": str(data_dir)},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    exported: list[dict[str, object]] = json.loads(run.stdout)
    return exported


def searched(path: Path) -> dict[str, list[str]]:
    database = Database(path)
    try:
        return {query: [e["id"] for e in database.list(query)] for query in QUERIES}
    finally:
        database.close()


def rows(path: Path, table: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()


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
    for table in ("search_cache", "search_queries", "models", "tool_refusals", "turn_versions"):
        assert rows(back / DATABASE, table) == rows(home / DATABASE, table), table
    assert rows(home / DATABASE, "leases")  # the dead turn's, not carried over
    assert rows(back / DATABASE, "leases") == []


def test_running_it_twice_changes_nothing(home, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    first = migrate("--to", str(target), data_dir=home)
    assert first.returncode == 0, first.stderr
    copied = {table.name: rows(target / DATABASE, table.name) for table in TABLES}
    second = migrate("--to", str(target), data_dir=home)
    assert second.returncode == 0, second.stderr
    assert "already holds the same data: nothing written" in second.stdout
    assert f"messages {len(copied['messages']):,} = {len(copied['messages']):,}" in second.stdout
    assert {table.name: rows(target / DATABASE, table.name) for table in TABLES} == copied


def test_a_target_with_other_data_is_refused_and_kept_unless_replaced(home, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    theirs = Database(target / DATABASE)
    build(theirs, 3)
    theirs.close()
    kept = export(target)

    refused = migrate("--to", str(target), data_dir=home)
    assert refused.returncode == 2
    assert "holds other data" in refused.stderr
    assert "--replace" in refused.stderr
    assert f"conversations {CONVERSATIONS:,} != 3" in refused.stderr
    assert export(target) == kept

    replaced = migrate("--to", str(target), "--replace", data_dir=home)
    assert replaced.returncode == 0, replaced.stderr
    assert "replaced what it held" in replaced.stdout
    assert export(target) == export(home)


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
    assert not (tmp_path / DATABASE).exists() or export(tmp_path) == []


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
