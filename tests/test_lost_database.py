"""PostgreSQL going away under a running service (issue 26, "the service says what it
needs"): the turn streaming when it goes ends with a named failure and keeps its text, the
answer is saved once when it is back, the service serves again without a restart, and
while it is down every request says why. On a cluster of this module's own: killing it
disturbs no other test's."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from app.search.embedded import free_port
from tests.chat_client import Events, get_conversation, new_conversation, send, stream
from tests.conftest import ChatService, chat_env, run_cli
from tests.fakes.llm_server import Reply
from tests.postgres import Postgres, start_postgres
from tests.postgres import unavailable as postgres_unavailable

PIECES = [f"piece {n} " for n in range(60)]
SLOW = Reply(text=PIECES, chunk_delay=0.05)
"""Three seconds of answer: the database goes at the tenth piece."""
SECRET = "Sekr3t-pw"
LOCKED = "locked"
"""The cluster's one database behind a password (the others trust 127.0.0.1)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Postgres]:
    reason = postgres_unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {reason} (.ci/run installs it)")
        pytest.skip(reason)
    server = start_postgres()
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
    server.stop()
    server.remove()


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
    messages = stored_answer(chat, conversation_id)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"] == "".join(PIECES)
    assert httpx.get(f"{chat.url}/healthz").json()["database"]["answers"] is True
    llm.script(Reply(text="Second answer."))
    second = send(chat, conversation_id, "And once more?")
    assert second[-1]["type"] == "done", second[-1]
    messages = get_conversation(chat, conversation_id)["messages"]
    assert [m["content"] for m in messages] == [
        "Tell me slowly.",
        "".join(PIECES),
        "And once more?",
        "Second answer.",
    ]
    assert [m["id"] for m in httpx.get(f"{chat.url}/api/conversations").json()] == [
        conversation_id
    ]


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
