"""PostgreSQL going away under a running service (issue 26, "the service says what it
needs"): the turn streaming when it goes ends with a named failure and keeps its text, the
answer is saved once when it is back, the service serves again without a restart, and
while it is down every request says why. On a cluster of this module's own: killing it
disturbs no other test's."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from playwright.sync_api import expect

from app.chat.outcome import TurnOutcome
from app.chat.pending import PendingSaves
from app.search.embedded import free_port
from app.store.database import DATABASE, Database
from app.store.storage import Storage
from tests.browser import opened
from tests.chat_client import Events, get_conversation, new_conversation, stream
from tests.chat_client import send as api_send
from tests.conftest import ChatService, chat_env, run_cli
from tests.fakes.llm_server import Reply
from tests.page_actions import conversation_id as shown_conversation
from tests.page_actions import send, wait_turn_end
from tests.postgres import Postgres, own_cluster

PIECES = [f"piece {n} " for n in range(60)]
SLOW = Reply(text=PIECES, chunk_delay=0.05)
"""Three seconds of answer: the database goes at the tenth piece."""
SECRET = "Sekr3t-pw"
LOCKED = "locked"
"""The cluster's one database behind a password (the others trust 127.0.0.1)."""


@pytest.fixture(scope="module")
def cluster(postgresql: None) -> Iterator[Postgres]:
    with own_cluster() as server:
        (server.data / "pg_hba.conf").write_text(
            "local all all trust\n"
            f"host {LOCKED} all 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\n"
        )
        server.create(LOCKED)
        with psycopg.connect(server.url(), autocommit=True) as connection:
            connection.execute(f"ALTER USER \"{server.user}\" PASSWORD 'the-right-one'")
            connection.execute("SELECT pg_reload_conf()")
        yield server


def running(cluster: Postgres) -> None:
    """Started again if a test left it down."""
    if not (cluster.data / "postmaster.pid").exists():
        cluster.start()


@pytest.fixture
def service(cluster, llm, searxng, tmp_path) -> Iterator[tuple[ChatService, str]]:
    """The chat service on a new database of the cluster; the database's name."""
    name = f"lost_{os.urandom(4).hex()}"
    url = cluster.create(name)
    llm.clear()
    chat = ChatService(chat_env(llm, tmp_path, DATABASE_URL=url), searxng.url).start()
    yield chat, name
    chat.stop()
    running(cluster)


def stored_answer(chat, conversation_id: str, seconds: float = 30) -> list[dict]:
    """The conversation's messages once its answer is stored complete."""
    deadline = time.monotonic() + seconds
    while True:
        response = httpx.get(f"{chat.url}/api/conversations/{conversation_id}", timeout=10)
        if response.status_code == 200:
            messages = response.json()["messages"]
            if messages and messages[-1].get("status") == "complete":
                return messages
        assert time.monotonic() < deadline, f"the answer was never saved: {response.text}"
        time.sleep(0.2)


@pytest.mark.parametrize("outage", ["kill", "stop"])
def test_a_database_lost_mid_stream_keeps_the_answer_and_the_service_serves_again(
    service, cluster, llm, outage
):
    """After a kill the waiting answer is read back first; after a stop the next message
    is sent at once, and the waiting answer is written before it (not refused as busy by
    the lease the lost turn still holds)."""
    chat, name = service
    where = f"127.0.0.1:{cluster.port}/{name}"
    conversation_id = new_conversation(chat)
    llm.script(SLOW)

    def lose_the_database(events: Events) -> bool:
        if sum(e["type"] == "delta" for e in events) == 10:
            cluster.kill() if outage == "kill" else cluster.stop()
        return False

    path = f"/api/conversations/{conversation_id}/chat"
    events = stream(chat, path, {"message": "Tell me slowly."}, stop=lose_the_database)

    # The whole answer reached the user, then the named failure ended the turn.
    assert "".join(e["text"] for e in events if e["type"] == "delta") == "".join(PIECES)
    assert [e["type"] for e in events if e["type"] != "delta"] == ["error"]
    failure = events[-1]
    assert failure["kind"] == "database" and failure["restore"] is None
    assert f"PostgreSQL at {where}" in failure["message"]
    assert "will be saved when it is back" in failure["message"]

    # While it is down: every request says why, /healthz says the database does not answer.
    listed = httpx.get(f"{chat.url}/api/conversations", timeout=30)
    assert listed.status_code == 503
    assert f"PostgreSQL at {where}" in listed.json()["detail"]
    assert "does not answer" in listed.json()["detail"]
    health = httpx.get(f"{chat.url}/healthz", timeout=30)
    assert health.status_code == 200
    assert health.json()["database"] == {"backend": "postgresql", "answers": False}
    assert health.json()["status"] == "degraded"

    cluster.start()

    # Back: the answer is stored, once, complete; the service serves without a restart.
    if outage == "kill":
        messages = stored_answer(chat, conversation_id)
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert messages[1]["content"] == "".join(PIECES)
        assert httpx.get(f"{chat.url}/healthz").json()["database"]["answers"] is True
    llm.script(Reply(text="Second answer."))
    second = api_send(chat, conversation_id, "And once more?")
    assert second[-1]["type"] == "done", second[-1]
    messages = get_conversation(chat, conversation_id)["messages"]
    assert messages[1]["status"] == "complete"
    assert [m["content"] for m in messages] == [
        "Tell me slowly.",
        "".join(PIECES),
        "And once more?",
        "Second answer.",
    ]
    assert [m["id"] for m in httpx.get(f"{chat.url}/api/conversations").json()] == [conversation_id]


def test_a_stop_while_the_database_is_down_keeps_what_the_user_saw(service, cluster, llm):
    """Stop cancels the turn's task, and the web server cancels again at every await that
    follows: the outcome's hand-over to the waiting saves must not be one of them."""
    chat, _ = service
    conversation_id = new_conversation(chat)
    llm.script(SLOW)

    def lose_the_database_then_stop(events: Events) -> bool:
        deltas = sum(e["type"] == "delta" for e in events)
        if deltas == 10:
            cluster.kill()
        return deltas == 30  # well past the last checkpoint the database took

    path = f"/api/conversations/{conversation_id}/chat"
    events = stream(chat, path, {"message": "Tell me slowly."}, stop=lose_the_database_then_stop)
    seen = "".join(e["text"] for e in events if e["type"] == "delta")
    time.sleep(1)  # the stopped turn's end, in the service
    cluster.start()

    deadline = time.monotonic() + 30
    while True:
        answer = get_conversation(chat, conversation_id)["messages"][-1]
        if answer["role"] == "assistant" and len(answer["content"]) >= len(seen):
            break
        assert time.monotonic() < deadline, f"kept {len(answer['content'])} of {len(seen)}"
        time.sleep(0.2)
    # What the service had sent when it saw the hang-up: at least what the client read.
    assert answer["content"].startswith(seen) and answer["status"] == "interrupted"
    assert len(answer["content"]) < len("".join(PIECES))


@pytest.mark.parametrize("command", ["serve", "doctor"])
@pytest.mark.parametrize("case", ["unreachable", "wrong password", "no such database"])
def test_a_database_that_cannot_be_used_is_one_line_at_start(cluster, command, case):
    port = {"unreachable": free_port()}.get(case, cluster.port)
    database = {"wrong password": LOCKED}.get(case, "nowhere")
    url = f"postgresql://{cluster.user}:{SECRET}@127.0.0.1:{port}/{database}"
    args = [command, "--port", str(free_port())] if command == "serve" else [command]
    run = run_cli(*args, searxng_url="http://127.0.0.1:9", DATABASE_URL=url)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ") and f"127.0.0.1:{port}/{database}" in lines[0]
    what = {
        "unreachable": "check that the server runs and accepts connections from here",
        "wrong password": "check the user and password in DATABASE_URL",
        "no such database": "create it (createdb nowhere) or fix the database name",
    }[case]
    assert what in lines[0]
    assert SECRET not in run.stderr + run.stdout
    assert run.stdout == ""


# -- the late write: only where the turn left the conversation -------------------------------
# Two replicas on one database: this one's turn lost the database at its end and keeps its
# outcome (PendingSaves); the other (a Database of its own) acts on the conversation before
# the late write lands. On both backends (conftest's `database_url`): the rule is the
# store's, not PostgreSQL's.


def late_write(
    tmp_path, database_url: str, meanwhile, *, checkpointed: bool = True
) -> tuple[list[tuple[str, str, str]], bool]:
    """A turn answering "First?" ends with its outcome kept for the database (having
    written a checkpoint, or lost the database before its first); `meanwhile` (given the
    other replica's Database and the conversation) runs before it is written. The stored
    messages after (role, content, status), and whether the lease is free."""
    storage = Storage(tmp_path / "data", database_url=database_url)
    storage.open()
    other = Database(database_url or tmp_path / "data" / DATABASE)

    async def run() -> tuple[list[tuple[str, str, str]], bool]:
        created = await storage.create("t", {})
        conversation_id = created["id"]
        lease, start = await storage.begin_turn(conversation_id, "First?", "fake-model")
        outcome = TurnOutcome("fake-model", position=len(start.conversation["messages"]))
        outcome.written.add("The first answer.")
        outcome.status = "complete"
        if checkpointed:
            checkpoint = {**outcome.answer(), "status": "interrupted"}  # what the stream left
            await storage.put_message(conversation_id, outcome.position, checkpoint)
        meanwhile(other, conversation_id)
        pending = PendingSaves()
        pending.keep(lease, outcome.write(), "First?")
        while pending.saves:
            await asyncio.sleep(0.05)
        messages = (await storage.load(conversation_id))["messages"]
        free = not other.held(conversation_id)
        lease.dropped()
        return [(m["role"], m["content"], m.get("status", "")) for m in messages], free

    try:
        return asyncio.run(run())
    finally:
        other.close()
        storage.close()


def expire_leases(database: Database, conversation_id: str) -> None:
    """As when the database was down longer than a lease lasts."""
    with database.write():
        database.db.execute(
            "UPDATE leases SET expires = 0 WHERE conversation = ?", (conversation_id,)
        )


def test_the_late_answer_is_written_once_where_the_turn_left_it(tmp_path, database_url):
    messages, free = late_write(tmp_path, database_url, expire_leases)
    assert messages == [("user", "First?", ""), ("assistant", "The first answer.", "complete")]
    assert free  # the write released the lease with it


@pytest.mark.parametrize("checkpointed", [True, False])
def test_a_late_answer_never_overwrites_a_later_turn(tmp_path, database_url, checkpointed, caplog):
    def later_turn(other: Database, conversation_id: str) -> None:
        expire_leases(other, conversation_id)
        assert other.begin_turn(conversation_id, "other-replica:1:x", "Second?", "fake-model")
        answer = {"role": "assistant", "content": "The second answer.", "status": "complete"}
        write = {
            "position": 3 if checkpointed else 2, "answer": answer, "rewind": False,
            "summary": None, "summarized": None, "totals": {}, "budget": None, "usage": None,
        }  # fmt: skip
        other.save_outcome(conversation_id, write, "other-replica:1:x")

    with caplog.at_level(logging.WARNING, logger="app.chat.pending"):
        messages, free = late_write(tmp_path, database_url, later_turn, checkpointed=checkpointed)
    # The lost turn's checkpoint stays as it was; nothing doubled or replaced.
    lost = [("assistant", "The first answer.", "interrupted")] if checkpointed else []
    assert messages == [
        ("user", "First?", ""),
        *lost,
        ("user", "Second?", ""),
        ("assistant", "The second answer.", "complete"),
    ]
    assert free
    assert "is not saved: the conversation moved on meanwhile" in caplog.text


def test_a_late_answer_to_a_question_taken_back_is_dropped(tmp_path, database_url, caplog):
    def rewound_and_asked_again(other: Database, conversation_id: str) -> None:
        expire_leases(other, conversation_id)
        assert other.rewind(conversation_id) == "First?"
        assert other.begin_turn(conversation_id, "other-replica:1:y", "Another?", "fake-model")
        other.release(conversation_id, "other-replica:1:y")

    with caplog.at_level(logging.WARNING, logger="app.chat.pending"):
        messages, _ = late_write(tmp_path, database_url, rewound_and_asked_again)
    assert messages == [("user", "Another?", "")]
    assert "moved on meanwhile" in caplog.text


def test_an_answer_the_database_never_takes_is_given_up_with_a_log_line(cluster, tmp_path, caplog):
    storage = Storage(tmp_path / "data", database_url=cluster.create("given_up"))
    storage.open()

    async def run() -> None:
        conversation_id = (await storage.create("t", {}))["id"]
        lease, start = await storage.begin_turn(conversation_id, "First?", "fake-model")
        outcome = TurnOutcome("fake-model", position=len(start.conversation["messages"]))
        outcome.written.add("An answer nobody will read.")
        cluster.kill()
        pending = PendingSaves(give_up_after=2.0)
        pending.keep(lease, outcome.write(), "First?")
        while pending.saves:
            await asyncio.sleep(0.1)
        cluster.start()
        assert [m["role"] for m in (await storage.load(conversation_id))["messages"]] == ["user"]

    try:
        with caplog.at_level(logging.WARNING, logger="app.chat.pending"):
            asyncio.run(run())
    finally:
        running(cluster)
        storage.close()
    assert (
        "gave up saving its answer (27 chars): the database did not answer for 2 s" in caplog.text
    )


# -- the page (last: Playwright keeps a loop open for the module; asyncio.run cannot follow) -


def test_the_page_names_the_lost_database_keeps_the_answer_and_comes_back_by_itself(
    browser, service, cluster, llm
):
    chat, name = service
    where = f"PostgreSQL at 127.0.0.1:{cluster.port}/{name}"
    with opened(browser, chat.url) as page:
        llm.script(SLOW)
        send(page, "Tell me slowly.")
        expect(page.locator("#messages")).to_contain_text("piece 9 ", timeout=20_000)
        cluster.kill()
        wait_turn_end(page)
        card = page.locator(".error-card[data-kind=database]")
        expect(card.locator("h3")).to_have_text("The database stopped answering")
        expect(card).to_contain_text("It is saved once the database answers again")
        expect(card.locator("button.retry")).to_have_count(0)
        expect(page.locator("#messages")).to_contain_text("piece 59")  # all it was sent
        asked = shown_conversation(page)
        # The list says why it is not there, rather than "No conversations yet".
        page.evaluate("document.querySelector('#new-conversation').click()")
        expect(page.locator("#conversation-list .list-error")).to_contain_text(
            where, timeout=20_000
        )
        # Opened anew while it is down: the page says what the service lacks.
        page.reload()
        expect(page.locator("body")).to_contain_text(
            f"The chat service cannot serve the page now: the database ({where}) does not answer",
            timeout=20_000,
        )
        cluster.start()
        stored_answer(chat, asked)
        # The page starts by itself at its next try (they come at most 30 s apart).
        expect(page.locator("body")).to_have_attribute("data-ready", "yes", timeout=40_000)
        expect(page.locator("#start-notice")).to_have_count(0)
        expect(page.locator("#conversation-list")).to_contain_text("Tell me slowly.")
        page.evaluate(f"location.hash = '#/c/{asked}'")
        expect(page.locator("#messages")).to_contain_text("piece 59")
