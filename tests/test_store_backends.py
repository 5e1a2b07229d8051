"""What the two backends must agree on beyond tests/test_storage.py (docs/architecture.md,
"Two backends"): leases expire by the database's clock, whatever a replica's clock says;
a dead replica's lease is taken over once expired; search splits and folds words as FTS5
does; PostgreSQL's schema version; /healthz names the database; a PostgreSQL that cannot be
reached stops `serve` with one line, and one lost meanwhile is one named error."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import httpx
import psycopg
import pytest

from app.search.embedded import free_port
from app.store import leases
from app.store.database import Database
from app.store.errors import Busy, Damaged, SchemaRefused, Unavailable
from app.store.migrations import SCHEMA_VERSION
from tests.conftest import ROOT, ChatService, chat_env

ELSEWHERE = "replica-b.example:4242:0a0b"
"""A lease owner on another machine: only its expiry frees what it holds."""


@pytest.fixture
def store(tmp_path, database_url):
    return database_url or tmp_path / "chat.db"


# -- leases across machines --------------------------------------------------------------------


def test_a_dead_replicas_lease_is_taken_over_once_expired(store, monkeypatch):
    monkeypatch.setattr(leases, "LEASE_SECONDS", 1.0)
    database = Database(store)
    conversation_id = database.create("x", {})["id"]
    assert database.begin_turn(conversation_id, ELSEWHERE, "First?", "m")  # then it died
    assert database.begin_turn(conversation_id, "here:1:aa", "Mine?", "m") is None
    with pytest.raises(Busy):
        database.delete(conversation_id)
    time.sleep(1.2)  # its lease runs out; nobody renews it
    assert not database.held(conversation_id)
    assert database.begin_turn(conversation_id, "here:1:aa", "Mine?", "m")
    assert not database.renew(conversation_id, ELSEWHERE)  # the dead one's renewal fails
    assert database.held(conversation_id)
    contents = [m["content"] for m in database.load(conversation_id)["messages"]]
    assert contents == ["First?", "Mine?"]
    database.close()


@pytest.mark.parametrize("skew", [3600.0, -3600.0], ids=["clock-ahead", "clock-behind"])
def test_leases_expire_by_the_databases_clock_not_the_replicas(store, monkeypatch, skew):
    """A replica whose clock is an hour off neither takes a live lease nor leaves one that
    expires an hour early or late."""
    monkeypatch.setattr(leases, "LEASE_SECONDS", 1.0)
    database = Database(store)
    live, stale = (database.create(t, {})["id"] for t in "ls")
    assert database.begin_turn(live, ELSEWHERE, "Live?", "m")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + skew)  # the skewed replica's turn
    assert database.begin_turn(stale, "skewed:1:aa", "Stale?", "m")  # then it dies
    assert database.begin_turn(live, "skewed:1:bb", "Me too?", "m") is None
    with pytest.raises(Busy):
        database.rewind(live)
    monkeypatch.setattr(time, "time", real)  # a replica with the right time
    assert database.held(stale)
    time.sleep(1.2)
    assert database.begin_turn(stale, ELSEWHERE, "Taken over", "m")
    database.close()


# -- search ------------------------------------------------------------------------------------

TEXTS = {
    "city": "Spotkanie w Łodzi, ul. Piotrkowska; Øresund i Đakovo też.",
    "street": "Die Straße heißt Æblevej, nicht Œuvre; Þórsmörk.",
    "mail": "Napisz na jan.kowalski@example.com albo przez e-mail.",
    "numbers": "Pi is 3.14, version v2.0-rc1, user_name and don't.",
    "link": "See https://docs.example.org/guide/install.html#step-2 first.",
}
SEARCHES = {
    "lodzi": ["city"],
    "ŁÓDŹ": ["city"],
    "oresund": ["city"],
    "dakovo": ["city"],
    "strasse": ["street"],
    "STRAßE": ["street"],
    "heiss": ["street"],
    "aeblevej": ["street"],
    "oeuvre": ["street"],
    "thorsm": ["street"],
    "kowalski": ["mail"],
    "example com": ["mail"],
    "jan.kowalski@example.com": ["mail"],
    "e-mail": ["mail"],
    "mail": ["mail"],
    "14": ["numbers"],
    "3.14": ["numbers"],
    "rc1": ["numbers"],
    "v2": ["numbers"],
    "name": ["numbers"],
    "user_name": ["numbers"],
    "don't": ["numbers"],
    "docs example": ["link"],
    "install html": ["link"],
    "step 2": ["link"],
    "guide": ["link"],
    "piotrkowska spotkanie": ["city"],
    "piotrkowska straße": [],
    "ex": ["link", "mail"],
    "'&|!:*()": [],
    "nowhere": [],
}


def test_search_splits_and_folds_words_alike_on_both_backends(store):
    database = Database(store)
    ids = {}
    for name, text in TEXTS.items():
        conversation_id = database.create(name, {})["id"]
        database.put_message(conversation_id, 0, {"role": "user", "content": text})
        ids[conversation_id] = name
    found = {query: sorted(ids[e["id"]] for e in database.list(query)) for query in SEARCHES}
    database.close()
    assert found == SEARCHES


def test_saved_settings_leave_a_conversation_in_its_place_on_both_backends(store):
    """The list is by the last turn: saving a conversation's settings does not move it to
    the top (a rename neither). One with no message yet counts it as a change, so it is
    not dropped as untouched for an hour."""
    database = Database(store)
    try:
        older = database.create("Older", {})["id"]
        database.put_message(older, 0, {"role": "user", "content": "first"})
        newer = database.create("Newer", {})["id"]
        database.put_message(newer, 0, {"role": "user", "content": "second"})
        database.change(older, None, {"web_fetch": False})
        database.change(older, "Older, renamed", {})
        assert [entry["id"] for entry in database.list()] == [newer, older]
        empty = database.create("Empty", {})
        database.change(empty["id"], None, {"web_fetch": False})
        assert database.load(empty["id"])["updated"] > empty["updated"]
    finally:
        database.close()


# -- PostgreSQL's schema -----------------------------------------------------------------------


def test_postgresql_is_migrated_once_and_a_newer_schema_is_refused(postgres_url):
    Database(postgres_url).close()
    again = Database(postgres_url)  # a second replica's start: nothing to do
    assert again.scalar("SELECT version FROM schema_version") == SCHEMA_VERSION
    again.db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    again.close()
    with pytest.raises(Damaged, match="newer version"):
        Database(postgres_url)


def test_a_user_not_allowed_to_build_the_schema_is_told_what_it_needs(postgres_url):
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("CREATE ROLE visitor LOGIN")
    visitor = postgres_url.replace("://postgres@", "://visitor@", 1)
    if visitor == postgres_url:  # the cluster's owner is this user, not postgres
        visitor = re.sub(r"://[^@]+@", "://visitor@", postgres_url, count=1)
    with pytest.raises(SchemaRefused, match="unaccent"):
        Database(visitor)


# -- what a replica says about its database ----------------------------------------------------


def test_healthz_names_the_database_it_uses(llm, searxng, tmp_path, backend, database_url):
    env = chat_env(llm, tmp_path, DATABASE_URL=database_url)
    service = ChatService(env, searxng.url, socket=False).start()
    try:
        health = service.http.get("/healthz").json()
    finally:
        service.stop()
    assert health["database"] == {"backend": backend, "answers": True}
    assert health["status"] == "ok"


def test_a_lost_postgresql_is_a_named_error_and_serves_again_when_back(
    llm, searxng, tmp_path, own_postgres
):
    url = own_postgres.create("chat")
    service = ChatService(chat_env(llm, tmp_path, DATABASE_URL=url), searxng.url).start()
    try:
        own_postgres.stop()
        health = httpx.get(f"{service.url}/healthz", timeout=20).json()
        assert health["database"] == {"backend": "postgresql", "answers": False}
        assert health["status"] == "degraded"
        database = service.app.state.services.storage.database
        with pytest.raises(Unavailable, match=f"127.0.0.1:{own_postgres.port}"):
            database.list()
        own_postgres.start()
        assert database.list() == []  # the pool replaced the connections it lost
        assert httpx.get(f"{service.url}/healthz").json()["database"]["answers"] is True
    finally:
        service.stop()


def test_serve_stops_with_one_line_when_postgresql_cannot_be_reached(llm, searxng, tmp_path):
    port = free_port()  # nothing listens there
    env = {
        **chat_env(llm, tmp_path),
        "DATABASE_URL": f"postgresql://chat:secret-password@127.0.0.1:{port}/chat",
        "SEARXNG_URL": searxng.url,
    }
    started = time.monotonic()
    finished = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--port", str(free_port())],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=30,
    )
    assert finished.returncode != 0
    errors = finished.stderr.strip().splitlines()
    assert errors[-1].startswith(f"error: cannot reach PostgreSQL at 127.0.0.1:{port}/chat")
    assert "DATABASE_URL" in errors[-1]
    assert "Traceback" not in finished.stderr and "secret-password" not in finished.stderr
    assert time.monotonic() - started < 30
    assert not os.path.exists(tmp_path / "data" / "chat.db")  # no SQLite instead
