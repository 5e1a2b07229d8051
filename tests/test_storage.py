"""Conversations on both backends (SQLite in DATA_DIR, PostgreSQL at DATABASE_URL: each
test that takes `database_url` runs on both): the import of older JSON files, search,
leases shared by every process on the same database, schema versions, the export command,
and a disk that is slow never freezing the other requests."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from app.store.database import Database
from app.store.errors import Conflict, Damaged
from app.store.leases import new_owner
from app.store.migrations import MIGRATIONS, SCHEMA_VERSION
from app.store.rows import OutcomeWrite
from app.store.storage import Storage
from tests.chat_client import get_conversation, new_conversation, send
from tests.conftest import ChatService, chat_env, run_main, service_for, store_of
from tests.fakes.llm_server import Reply

OLD_FILE = {
    "id": "20250301-0a1b2c3d4e",
    "title": "Pierogi w Gdańsku",
    "created": "2025-03-01T10:00:00.000000+00:00",
    "updated": "2025-03-01T10:05:00.000000+00:00",
    "settings": {"model": "fake-model", "search_locale": "pl-PL", "web_search": True},
    "messages": [
        {"role": "user", "content": "Gdzie zjeść pierogi?", "created": "2025-03-01T10:00:00"},
        {
            "role": "assistant",
            "content": "W Gdańsku, na Starym Mieście.",
            "status": "complete",
            "sources": [{"url": "https://example.pl/pierogi", "title": "Pierogarnia"}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 9},
        },
    ],
    "summary": "",
    "summarized": 0,
    "totals": {"prompt_tokens": 120, "completion_tokens": 9, "searches": 1},
}


@pytest.fixture
def service(request, llm, searxng, tmp_path, database_url):
    llm.clear()
    env = chat_env(llm, tmp_path, DATABASE_URL=database_url)
    with service_for(request, env, searxng.url) as started:
        yield started


@pytest.fixture
def store(tmp_path, database_url):
    """A test's own database: DATA_DIR's chat.db (here tmp_path), or PostgreSQL's."""
    return store_of(tmp_path, database_url)


def service_database(service) -> Database:
    """A connection of the test's own to the service's database."""
    return Database(store_of(service.settings.data_dir, service.settings.database_url))


def listed(chat, query: str = "") -> list[str]:
    response = chat.http.get("/api/conversations", params={"q": query})
    assert response.status_code == 200
    return [c["id"] for c in response.json()]


# -- import of the JSON files of earlier versions ----------------------------------------------


def test_old_conversation_files_are_imported_then_set_aside(llm, searxng, tmp_path, database_url):
    folder = tmp_path / "data" / "conversations"
    folder.mkdir(parents=True)
    (folder / f"{OLD_FILE['id']}.json").write_text(json.dumps(OLD_FILE), encoding="utf-8")
    (folder / "20250302-ffffffffff.json").write_text('{"id": "20250302-ff', encoding="utf-8")
    (tmp_path / "data" / "models.json").write_text('["my-model"]', encoding="utf-8")

    env = chat_env(llm, tmp_path, DATABASE_URL=database_url)
    service = ChatService(env, searxng.url, socket=False).start()
    try:
        imported = get_conversation(service, OLD_FILE["id"])
        assert imported["title"] == OLD_FILE["title"]
        assert imported["messages"] == OLD_FILE["messages"]
        assert imported["totals"] == OLD_FILE["totals"]
        assert listed(service) == [OLD_FILE["id"]]  # the damaged file is not half-imported
        config = service.http.get("/api/config").json()
        assert config["models"]["added"] == ["my-model"]
        llm.script(Reply(text="Też w Krakowie."))
        assert send(service, OLD_FILE["id"], "A w Krakowie?")[-1]["type"] == "done"
    finally:
        service.stop()
    assert not folder.exists()
    aside = next((tmp_path / "data").glob("conversations.imported-*"))
    # Nothing deleted: both files, the unreadable one included, are kept where a user finds them.
    assert sorted(p.name for p in aside.iterdir()) == [
        f"{OLD_FILE['id']}.json",
        "20250302-ffffffffff.json",
    ]
    assert (tmp_path / "data" / "models.json.imported").exists()


def test_an_import_interrupted_halfway_is_finished_without_duplicates(tmp_path, store):
    folder = tmp_path / "conversations"
    folder.mkdir()
    (folder / f"{OLD_FILE['id']}.json").write_text(json.dumps(OLD_FILE), encoding="utf-8")
    database = Database(store)
    database.import_one(OLD_FILE)  # a first start got this far, then died
    assert database.import_files(tmp_path) == 0
    assert database.ids() == [OLD_FILE["id"]]
    assert len(database.load(OLD_FILE["id"])["messages"]) == 2


# -- search ------------------------------------------------------------------------------------


def test_search_matches_word_starts_in_any_case_with_or_without_accents(service, llm):
    llm.script(Reply(text="Zupa żurek jest kwaśna."))
    soup = new_conversation(service)
    send(service, soup, "Jak ugotować żurek w Łodzi?")
    other = new_conversation(service)
    assert listed(service, "żurek") == [soup]
    assert listed(service, "ZUREK") == [soup]  # no Polish keyboard needed
    assert listed(service, "łodz") == [soup]  # a word's start, ó or o
    assert listed(service, "lodz") == [soup]  # ł, which has no accent to remove, or l
    assert listed(service, "ŁÓDŹ") == [soup]
    assert listed(service, "kwaśna zupa") == [soup]  # every word, from the answer
    assert listed(service, "kwaśna rosół") == []
    assert listed(service, '"*) OR (') == []  # query syntax is text, not an error
    assert listed(service, "") == [soup]  # the other has no message yet: not listed
    assert other not in listed(service, "ugotować")


def test_a_renamed_conversation_is_found_by_its_new_title_only(service, llm):
    llm.script(Reply(text="Dobrze."))
    conversation_id = new_conversation(service)
    send(service, conversation_id, "Cześć")
    url = f"/api/conversations/{conversation_id}"
    service.http.patch(url, json={"title": "Wakacje w Chorwacji"})
    assert listed(service, "chorwacji") == [conversation_id]
    service.http.patch(url, json={"title": "Urlop nad morzem"})
    assert listed(service, "chorwacji") == [] and listed(service, "morzem") == [conversation_id]


# -- leases ------------------------------------------------------------------------------------


def test_two_services_on_one_database_never_run_two_turns_at_once(
    llm, searxng, tmp_path, database_url
):
    """Two processes on one DATA_DIR (SQLite), or two replicas with a DATA_DIR each, as on
    two machines, on one PostgreSQL."""
    env = chat_env(llm, tmp_path, DATABASE_URL=database_url)
    first = ChatService(env, searxng.url, socket=False).start()
    if database_url:
        env = chat_env(llm, tmp_path / "elsewhere", DATABASE_URL=database_url)
    second = ChatService(env, searxng.url, socket=False).start()
    try:
        conversation_id = new_conversation(first)
        llm.script(Reply(text=[f"part {n} " for n in range(40)], chunk_delay=0.05))
        thread = threading.Thread(target=send, args=(first, conversation_id, "Slowly."))
        thread.start()
        deadline = time.monotonic() + 10
        watcher = service_database(first)  # not the service's connection
        while not watcher.held(conversation_id):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        watcher.close()
        url = f"/api/conversations/{conversation_id}"
        refused = second.http.post(f"{url}/chat", json={"message": "Me too"})
        assert refused.status_code == 409 and "already running" in refused.json()["detail"]
        assert second.http.post(f"{url}/rewind", json={}).status_code == 409
        assert second.http.delete(url).status_code == 409
        thread.join(timeout=30)
        llm.script(Reply(text="Now it is my turn."))
        assert send(second, conversation_id, "Me too")[-1]["type"] == "done"
        messages = get_conversation(second, conversation_id)["messages"]
        assert [m["content"] for m in messages][-2:] == ["Me too", "Now it is my turn."]
        assert len(messages) == 4
    finally:
        first.stop()
        second.stop()


def dead_pid() -> int:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(finished.stdout)


@pytest.mark.parametrize(
    ("owner", "expires_in", "blocks"),
    [
        pytest.param(f"{socket.gethostname()}:{{dead}}:ab", 30, False, id="dead-owner-here"),
        pytest.param("other-host:1:ab", -1, False, id="expired-elsewhere"),
        pytest.param("other-host:1:ab", 30, True, id="live-elsewhere"),
        pytest.param(f"{socket.gethostname()}:{os.getpid()}:ab", 30, True, id="live-here"),
    ],
)
def test_a_lease_left_by_a_crash_is_taken_over(service, llm, owner, expires_in, blocks):
    conversation_id = new_conversation(service)
    database = service_database(service)
    database.db.execute(  # expiring by the database's clock
        "INSERT INTO leases (conversation, owner, expires) "
        f"VALUES (?, ?, {database.dialect.clock} + ?)",
        (conversation_id, owner.format(dead=dead_pid()), expires_in),
    )
    database.close()
    llm.script(Reply(text="Answered."))
    url = f"/api/conversations/{conversation_id}"
    response = service.http.post(f"{url}/chat", json={"message": "Anyone there?"})
    assert response.status_code == (409 if blocks else 200)


def test_only_its_owner_releases_a_lease(store):
    database = Database(store)
    conversation_id = database.create("x", {})["id"]
    mine, late = new_owner(), new_owner()
    assert database.begin_turn(conversation_id, mine, "First?", "m")
    database.release(conversation_id, late)  # a late release from an older turn
    assert database.held(conversation_id)
    assert not database.begin_turn(conversation_id, late, "Second?", "m")
    assert [m["content"] for m in database.load(conversation_id)["messages"]] == ["First?"]
    database.release(conversation_id, mine)
    assert not database.held(conversation_id)


def test_a_turn_that_cannot_start_leaves_no_lease(store):
    """Regenerate with nothing to regenerate: the lease taken in the same transaction goes."""
    database = Database(store)
    conversation_id = database.create("x", {})["id"]
    with pytest.raises(Conflict, match="nothing to regenerate"):
        database.begin_turn(conversation_id, new_owner(), None, "m")
    assert not database.held(conversation_id)


def test_the_outcome_releases_its_own_lease_only(store):
    database = Database(store)
    conversation_id = database.create("x", {})["id"]
    mine = new_owner()
    assert database.begin_turn(conversation_id, mine, "Hi?", "m")
    outcome: OutcomeWrite = {
        "position": 1,
        "answer": {"role": "assistant", "content": "Hello."},
        "rewind": False,
        "summary": None,
        "summarized": None,
        "totals": {},
        "budget": None,
        "usage": None,
    }
    database.save_outcome(conversation_id, outcome, new_owner())  # a stale turn's
    assert database.held(conversation_id)
    database.save_outcome(conversation_id, outcome, mine)
    assert not database.held(conversation_id)


def test_a_turn_reads_the_answers_digests_without_their_other_details(store):
    database = Database(store)
    conversation_id = database.create("x", {})["id"]
    database.put_message(conversation_id, 0, {"role": "user", "content": "Where?"})
    answer = {"role": "assistant", "content": "Here [1].", "digest": "[1] A page", "sources": []}
    database.put_message(conversation_id, 1, answer)
    database.put_message(conversation_id, 2, {"role": "assistant", "content": "Plain."})
    database.put_message(conversation_id, 3, {"role": "assistant", "content": "Broken."})
    database.db.execute("UPDATE messages SET details = '{\"digest\": ' WHERE position = 3")
    loaded = database.load(conversation_id, details=False)["messages"]
    assert loaded == [
        {"role": "user", "content": "Where?"},
        {"role": "assistant", "content": "Here [1].", "digest": "[1] A page"},
        {"role": "assistant", "content": "Plain."},
        # A turn never parses the details: damaged ones do not stop it.
        {"role": "assistant", "content": "Broken."},
    ]


def test_a_turn_reads_only_the_latest_digests_it_sends(store):
    database = Database(store)
    conversation_id = database.create("x", {})["id"]
    for n in range(4):
        database.put_message(conversation_id, 2 * n, {"role": "user", "content": f"Q{n}?"})
        answer = {"role": "assistant", "content": f"A{n}.", "digest": f"[1] page {n}"}
        database.put_message(conversation_id, 2 * n + 1, answer)
    database.put_message(conversation_id, 8, {"role": "assistant", "content": "No tools."})

    def digests(**kwargs) -> list[str | None]:
        messages = database.load(conversation_id, details=False, **kwargs)["messages"]
        return [m.get("digest") for m in messages if m["role"] == "assistant"]

    assert digests() == ["[1] page 0", "[1] page 1", "[1] page 2", "[1] page 3", None]
    assert digests(digests=2) == [None, None, "[1] page 2", "[1] page 3", None]
    assert digests(digests=0) == [None] * 5
    assert database.digests(conversation_id, 0, 4) == {1: "[1] page 0", 3: "[1] page 1"}


# -- schema ------------------------------------------------------------------------------------


def test_a_new_database_is_at_the_current_schema_and_a_newer_one_is_refused(tmp_path):
    path = tmp_path / "chat.db"
    Database(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(Damaged, match="newer version"):
        Database(path)


def test_a_database_of_schema_1_is_migrated_keeping_its_conversations(tmp_path):
    path = tmp_path / "chat.db"
    with sqlite3.connect(path) as db:  # as the first release left it, with one conversation
        db.executescript(MIGRATIONS[0].sqlite)
        db.execute(
            "INSERT INTO conversations (id, title, created, updated, settings) "
            "VALUES ('20250301-0a1b2c3d4e', 'Kept in Łódź', '2025-03-01', '2025-03-01', '{}')"
        )
        db.execute(
            "INSERT INTO messages (conversation, position, role, content, details) "
            "VALUES (1, 0, 'user', 'Gdzie jest żółw?', '{}')"
        )
        db.execute(  # a digest kept in the details, as the third schema had it
            "INSERT INTO messages (conversation, position, role, content, details) "
            "VALUES (1, 1, 'assistant', 'W ZOO [1].', ?)",
            ('{"digest": "[1] ZOO", "status": "complete"}',),
        )
        picked = [(0, "mine"), (1, "q:8b")]
        db.executemany("INSERT INTO models (position, id) VALUES (?, ?)", picked)
        db.execute("PRAGMA user_version = 1")
    db.close()

    database = Database(path)
    assert database.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert database.load("20250301-0a1b2c3d4e")["title"] == "Kept in Łódź"
    # the index is rebuilt folded: found by letters a Polish keyboard is not needed for
    assert [e["id"] for e in database.list("lodz")] == ["20250301-0a1b2c3d4e"]
    assert [e["id"] for e in database.list("zolw")] == ["20250301-0a1b2c3d4e"]
    answer = {"role": "assistant", "content": "W ZOO [1].", "digest": "[1] ZOO"}
    assert database.load("20250301-0a1b2c3d4e", details=False)["messages"][1] == answer
    assert database.load("20250301-0a1b2c3d4e")["messages"][1] == {**answer, "status": "complete"}
    assert database.models() == ["mine", "q:8b"]  # the picker's, as they were added
    assert database.tool_refusals() == []
    database.refuse_tools("fake-model", "does not support tools")
    assert [r["model"] for r in database.tool_refusals()] == ["fake-model"]


# -- nothing waits for the disk on the event loop ----------------------------------------------


@pytest.mark.socket  # in-process no timeout applies: a blocked loop would only be slow
def test_a_slow_disk_does_not_hold_up_other_requests(service, monkeypatch):
    conversation_id = new_conversation(service)
    entered, release = threading.Event(), threading.Event()
    original = Database.load

    def slow_load(self, wanted):
        entered.set()
        release.wait(10)
        return original(self, wanted)

    monkeypatch.setattr(Database, "load", slow_load)
    url = f"/api/conversations/{conversation_id}"
    reader = threading.Thread(target=service.http.get, args=(url,), kwargs={"timeout": 20})
    reader.start()
    assert entered.wait(10)
    try:  # the load is stuck in the storage thread; the loop still answers
        assert service.http.get("/healthz", timeout=5).status_code == 200
    finally:
        release.set()
        reader.join(timeout=20)


# -- export ------------------------------------------------------------------------------------


def export(data_dir, *args: str, database_url: str = "") -> subprocess.CompletedProcess[str]:
    """`python -m app export ...`, in this process (what it prints is the point)."""
    return run_main(
        "export",
        *args,
        searxng_url="http://127.0.0.1:9",
        DATA_DIR=str(data_dir),
        DATABASE_URL=database_url,
    )


def test_export_prints_conversations_without_the_service(service, llm):
    llm.script(Reply(text="Use **systemd** timers."))
    first = new_conversation(service)
    send(service, first, "How to run a job nightly?")
    second = new_conversation(service)
    data, url = service.settings.data_dir, service.settings.database_url

    as_markdown = export(data, first, database_url=url)
    assert as_markdown.returncode == 0, as_markdown.stderr
    assert "> How to run a job nightly?" in as_markdown.stdout
    assert "Use **systemd** timers." in as_markdown.stdout

    as_json = export(data, first, "--json", database_url=url)
    assert json.loads(as_json.stdout) == get_conversation(service, first)

    everything = export(data, "--all", "--json", database_url=url)
    assert [c["id"] for c in json.loads(everything.stdout)] == [first, second]

    missing = export(data, "20250101-0000000000", database_url=url)
    assert missing.returncode == 1 and "no conversation" in missing.stderr
    if not url:  # SQLite: a DATA_DIR with no chat.db
        nowhere = export(data / "absent", "--all")
        assert nowhere.returncode == 1 and "does not exist" in nowhere.stderr


def test_closing_writes_what_was_asked_and_refuses_what_comes_after(tmp_path):
    """The service's shutdown closes its storage while a write may still wait for the
    storage thread: the write lands before the database closes, and a query asked after
    the close fails at once rather than waiting for a thread that is gone."""
    storage = Storage(tmp_path)
    conversation_id = storage.database.create("Before", {})["id"]

    async def scenario() -> str:
        writing = asyncio.ensure_future(
            storage.run(storage.database.change, conversation_id, "After", {})
        )
        await asyncio.sleep(0)  # asked, not yet answered
        storage.thread.shutdown()
        await writing
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(storage.list(), timeout=5)
        return str(storage.database.load(conversation_id)["title"])

    try:
        assert asyncio.run(scenario()) == "After"
    finally:
        storage.close()


def test_a_cancelled_caller_does_not_cancel_its_write(tmp_path, database_url):
    """Stop cancels the turn's task (plain asyncio, not anyio) while its outcome waits for
    the storage thread: the caller is cancelled at once, the write still lands, in order,
    before the next query."""
    storage = Storage(tmp_path, database_url=database_url)
    conversation_id = storage.database.create("Before", {})["id"]
    disk_is_slow = threading.Event()

    async def scenario() -> tuple[bool, str]:
        busy = asyncio.create_task(storage.run(disk_is_slow.wait, 10))
        writing = asyncio.create_task(
            storage.run(storage.database.change, conversation_id, "After", {})
        )
        await asyncio.sleep(0.05)  # the rename waits behind the slow query
        writing.cancel()
        try:
            await writing
        except asyncio.CancelledError:
            cancelled = True
        else:
            cancelled = False
        disk_is_slow.set()
        await busy
        title = (await storage.run(storage.database.load, conversation_id))["title"]
        return cancelled, title

    try:
        assert asyncio.run(scenario()) == (True, "After")
    finally:
        storage.close()


def test_a_conversation_left_with_no_message_is_deleted_once_nobody_comes_back(
    tmp_path, database_url, store
):
    database = Database(store)
    abandoned, held, fresh, kept = (database.create(t, {})["id"] for t in "ahfk")
    owner = new_owner()
    assert database.begin_turn(kept, owner, "Hi?", "m")
    database.release(kept, owner)
    # A turn holds `held` (its lease taken, its message not written yet).
    database.db.execute(
        "INSERT INTO leases (conversation, owner, expires) "
        f"VALUES (?, ?, {database.dialect.clock} + 60)",
        (held, new_owner()),
    )
    long_ago = "2020-01-01T00:00:00.000000+00:00"
    for old in (abandoned, held, kept):
        database.db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (long_ago, old))
    newer = database.create("n", {})["id"]  # a new conversation sweeps the abandoned ones
    assert sorted(database.ids()) == sorted([held, fresh, kept, newer])
    database.db.execute("DELETE FROM leases WHERE conversation = ?", (held,))  # its turn ended
    database.close()

    storage = Storage(tmp_path, database_url=database_url)  # at start too, with none made
    storage.open()
    try:
        assert sorted(storage.database.ids()) == sorted([fresh, kept, newer])
        assert [m["content"] for m in storage.database.load(kept)["messages"]] == ["Hi?"]
    finally:
        storage.close()
