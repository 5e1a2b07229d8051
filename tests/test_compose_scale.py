"""Compose's scale profile for real (make test-compose): PostgreSQL, two chat replicas and
nginx in front, brought up from compose.yaml as the README says, against the fake Brave API
and the fake model server on the host (as tests/test_compose_live.py does), with the images
Compose would pull built locally under the same names (tests/compose/images.py). Skipped,
saying why, where no Docker engine answers.

Everything of the test's own Compose project is removed at the end, whatever happened.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.search.embedded import free_port
from tests.compose import images
from tests.compose.stack import (
    BRAVE_KEY,
    BUILD_SECONDS,
    Stack,
    answered_by,
    bridge_gateway,
    new_conversation,
    port_of,
    read_events,
    remove_everything,
    replicas,
    services,
)
from tests.fakes.brave_api import FakeBrave
from tests.fakes.llm_server import FakeLLM, Reply

ROOT = Path(__file__).resolve().parent.parent
REPLICAS = 2
POSTGRES_URL = "postgresql://chat@postgres:5432/chat"
LLM_KEY = "sk-compose-secret-for-the-model-server"
POSTGRES_PASSWORD = secrets.token_hex(16)
"""The README's target for migrate-db, the URL the replicas use (the password: PGPASSWORD)."""
FETCH = (
    "import sys, urllib.request; "
    "headers = {'Authorization': 'Bearer ' + sys.argv[2]} if len(sys.argv) > 2 else {}; "
    "request = urllib.request.Request('http://127.0.0.1:8080' + sys.argv[1], headers=headers); "
    "print(urllib.request.urlopen(request, timeout=10).read().decode())"
)
"""Run in a replica: the body of one of its own URLs (it exits non-zero on an error)."""


@dataclass
class ScaleStack(Stack):
    moved: Moved | None = None
    """The household the single service kept in SQLite, moved by migrate-db."""


@dataclass(frozen=True)
class Moved:
    conversation: str
    answer: str
    output: str


def migrate_db_here() -> bool:
    """Whether this tree has `python -m app migrate-db` (the migrate-db branch adds it)."""
    done = subprocess.run(
        [sys.executable, "-m", "app", "migrate-db", "--help"], capture_output=True, cwd=ROOT
    )
    return done.returncode == 0


def sqlite_household(stack: ScaleStack, llm: FakeLLM) -> Moved:
    """The README's move: a household on the single service (SQLite), `down`, then
    migrate-db into the profile's PostgreSQL before the profile's first `up`."""
    stack.up(label="single service up")
    llm.script(Reply(text="Tea is kept at 80 degrees."))
    with stack.api() as client:
        conversation = new_conversation(client)
        path = f"/api/conversations/{conversation}/chat"
        assert read_events(client, path, {"message": "How hot is the tea?"})[-1]["type"] == "done"
        assert client.put("/api/memory", json={"text": "- likes tea"}).status_code == 200
    stack.compose("down")
    started = time.monotonic()
    migrate = ["python", "-m", "app", "migrate-db", "--from", "/data", "--to", POSTGRES_URL]
    output = stack.compose("--profile", "scale", "run", "--rm", "chat-replica", *migrate)
    stack.timings["migrate-db under compose run"] = round(time.monotonic() - started, 1)
    return Moved(conversation, "Tea is kept at 80 degrees.", output)


@pytest.fixture(scope="module")
def fakes(docker: None) -> Iterator[tuple[FakeBrave, FakeLLM]]:
    host = bridge_gateway()
    brave, llm = FakeBrave(api_key=BRAVE_KEY), FakeLLM(models=["fake-model"])
    for fake in (brave, llm):
        fake.start(host=host)
    try:
        yield brave, llm
    finally:
        for fake in (brave, llm):
            fake.stop()


@pytest.fixture(scope="module")
def scale(fakes, tmp_path_factory) -> Iterator[ScaleStack]:
    brave, llm = fakes
    project = f"psc-scale-{uuid.uuid4().hex[:8]}"
    work = tmp_path_factory.mktemp("compose-scale")
    stack = ScaleStack(project, work / ".env", {}, free_port(), secrets.token_hex(16))
    # The keys as files (the single stack of test_compose_live.py has them in .env).
    keys = {
        "BRAVE_API_KEY_FILE": BRAVE_KEY,
        "LLM_API_KEY_FILE": LLM_KEY,
        "AUTH_TOKEN_FILE": stack.token,
        "POSTGRES_PASSWORD_FILE": POSTGRES_PASSWORD,
    }
    for name, value in keys.items():
        (work / name).write_text(value + "\n")
    stack.write_env(
        SEARXNG_SECRET=secrets.token_hex(32),
        BRAVE_API_URL=f"http://host.docker.internal:{port_of(brave)}",
        COMPOSE_LLM_BASE_URL=f"http://host.docker.internal:{port_of(llm)}/v1",
        MODELS="fake-model",
        DEFAULT_MODEL="fake-model",
        CHAT_PORT=str(stack.port),
        CHAT_REPLICAS=str(REPLICAS),
        SEARXNG_WORKERS="2",
        **{name: str(work / name) for name in keys},
    )
    started = time.monotonic()
    try:
        stack.timings.update(images.ensure_all(None))
        built = time.monotonic()
        stack.compose("--profile", "scale", "build", timeout=BUILD_SECONDS)
        stack.timings["chat image build"] = round(time.monotonic() - built, 1)
        if migrate_db_here():
            stack.moved = sqlite_household(stack, llm)
        # The README's command: the proxy and what it needs, not the single chat service.
        stack.up("--build", "proxy", label="scale profile up to healthy", profile="scale")
        yield stack
    finally:
        stack.timings["whole module"] = round(time.monotonic() - started, 1)
        report = f"Compose scale timings (s): {json.dumps(stack.timings)}\n"
        print(f"\n{report}")
        (images.cache_dir() / "last-scale-run.txt").write_text(report)
        stack.compose("--profile", "scale", "down", "-v", "--remove-orphans", check=False)
        remove_everything(project)


def in_replica(stack: Stack, index: int, path: str, *token: str) -> dict:
    """GET `path` of replica number `index` itself, from inside it (not through the proxy)."""
    command = ["exec", "-T", "--index", str(index), "chat-replica", "python", "-c", FETCH]
    return json.loads(stack.compose("--profile", "scale", *command, path, *token))


def container_log(container: dict) -> str:
    done = subprocess.run(
        ["docker", "logs", container["Id"]], capture_output=True, text=True, timeout=60
    )
    return done.stdout + done.stderr


def test_both_replicas_are_healthy_and_healthz_answers_through_the_proxy(scale):
    found = services(scale)
    assert "chat" not in found, "the single chat service (SQLite) started beside the replicas"
    assert len(found["chat-replica"]) == REPLICAS
    for name in ("postgres", "chat-replica", "proxy", "searxng"):
        for container in found[name]:
            assert container["State"]["Health"]["Status"] == "healthy", name
    on_postgresql = {"backend": "postgresql", "answers": True}
    with scale.api(token=None) as client:
        health = client.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok", health.text
    assert health.json()["database"] == on_postgresql
    for index in range(1, REPLICAS + 1):
        health = in_replica(scale, index, "/healthz")
        assert (health["search"], health["database"]) == ("ok", on_postgresql), index
    # SearXNG serves with several worker processes (GRANIAN_WORKERS from SEARXNG_WORKERS).
    top = subprocess.run(
        ["docker", "top", found["searxng"][0]["Id"], "-o", "pid,args"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    workers = [line for line in top.splitlines() if "granian" in line or "searxng" in line]
    assert len(workers) >= 3, top  # the main process and two workers


def test_searxng_cannot_reach_postgresql_and_the_replicas_can(scale):
    """SearXNG reads what the internet sends; PostgreSQL is on a network it is not on, by
    name or by address."""
    postgres = services(scale)["postgres"][0]
    address = postgres["NetworkSettings"]["Networks"][f"{scale.project}_backend"]["IPAddress"]
    assert scale.connects("chat-replica", "postgres", 5432, "scale")
    assert scale.connects("chat-replica", address, 5432, "scale")
    assert not scale.connects("searxng", "postgres", 5432, "scale")
    assert not scale.connects("searxng", address, 5432, "scale")
    for name, containers in services(scale).items():
        assert all(c["HostConfig"]["ReadonlyRootfs"] for c in containers), name


def test_keys_given_as_files_work_and_no_container_shows_them(scale, fakes):
    """Each key reached what reads it (the replicas logged in to PostgreSQL, a search went
    to Brave with its key, the API wants the token, the model server got its key), and no
    container's environment holds one."""
    brave, llm = fakes
    brave.clear()
    assert in_replica(scale, 1, "/healthz")["database"]["answers"] is True
    with scale.api(token=None) as client:
        assert client.get("/api/conversations").status_code == 401
    llm.script(Reply(text="Done."))
    with scale.api() as client:
        conversation = new_conversation(client)
        path = f"/api/conversations/{conversation}/chat"
        assert read_events(client, path, {"message": "hi"})[-1]["type"] == "done"
    assert llm.requests[-1].headers["authorization"] == f"Bearer {LLM_KEY}"
    search = ["exec", "-T", "chat-replica", "python", "-m", "app", "search", "tea"]
    scale.compose("--profile", "scale", *search)
    assert brave.requests and brave.requests[-1].headers.get("x-subscription-token") == BRAVE_KEY
    for container in scale.containers():
        shown = json.dumps(container["Config"]["Env"])
        for key in (BRAVE_KEY, LLM_KEY, scale.token, POSTGRES_PASSWORD):
            assert key not in shown, container["Name"]


def test_a_conversation_made_through_the_proxy_is_seen_by_both_replicas(scale):
    with scale.api() as client:
        conversation = new_conversation(client)
        # The proxy sends requests to the replicas in turn, among those Docker's DNS named
        # at its last answer (asked again every 5 s): a replica it has not named yet gets
        # none, so a few rounds are allowed (one run saw 6 of 6 go to one replica).
        deadline = time.monotonic() + 20
        while True:
            for _ in range(6):
                assert client.get(f"/api/conversations/{conversation}").status_code == 200
            addresses = answered_by(scale, f"GET /api/conversations/{conversation} ")
            if set(addresses) == set(replicas(scale)) or time.monotonic() > deadline:
                break
            time.sleep(2)
    assert set(addresses) == set(replicas(scale)), addresses
    for index in range(1, REPLICAS + 1):
        stored = in_replica(scale, index, f"/api/conversations/{conversation}", scale.token)
        assert stored["id"] == conversation, (index, stored)


def test_an_answer_streams_through_the_proxy_in_pieces(scale, fakes):
    llm = fakes[1]
    pieces = [f"piece {n} " for n in range(8)]
    llm.script(Reply(text=pieces, chunk_delay=0.3))
    arrived: list[float] = []
    with scale.api() as client:
        path = f"/api/conversations/{new_conversation(client)}/chat"
        with client.stream("POST", path, json={"message": "Take your time."}) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                if line.startswith("data: ") and json.loads(line[6:])["type"] == "delta":
                    arrived.append(time.monotonic())
    assert len(arrived) >= 2
    # Buffered by the proxy, every piece would arrive at once, at the end (7 gaps of 0.3 s).
    assert arrived[-1] - arrived[0] > 1.0, arrived


def test_stop_through_the_proxy_ends_the_turn_on_the_replica_running_it(scale, fakes):
    llm = fakes[1]
    llm.script(Reply(text="word ", endless=True, chunk_delay=0.1))
    with scale.api() as client:
        conversation = new_conversation(client)
        path = f"/api/conversations/{conversation}/chat"
        with client.stream("POST", path, json={"message": "Write forever."}) as response:
            assert response.status_code == 200
            deltas = 0
            for line in response.iter_lines():
                deltas += line.startswith("data: ") and '"delta"' in line
                if deltas == 3:
                    # Stop is a request of its own, which nginx may hand to either replica.
                    stop = client.post(f"/api/conversations/{conversation}/stop")
                    assert stop.status_code == 200 and stop.json() == {"stopped": True}
                    break
        stopped = time.monotonic()
        hung_up = llm.wait_hung_up(timeout=10)
        assert hung_up is not None, "the model server never saw the replica let go"
        assert hung_up - stopped < 5
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            messages = client.get(f"/api/conversations/{conversation}").json()["messages"]
            if len(messages) == 2 and messages[1]["status"] == "interrupted":
                break
            time.sleep(0.3)
        assert [m["role"] for m in messages] == ["user", "assistant"], messages
        assert messages[1]["status"] == "interrupted" and messages[1]["content"].startswith("word")
        # The next message is taken: the turn ended, its lease is free.
        llm.script(Reply(text="Done now."))
        events = read_events(client, path, {"message": "Stop there."})
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    # The replica the proxy sent the stream to ended it, and logged so.
    (address,) = answered_by(scale, f"POST /api/conversations/{conversation}/chat ")[:1]
    ran = replicas(scale)[address]
    assert f"turn {conversation} interrupted" in container_log(ran)


def test_a_sqlite_household_moved_by_migrate_db_is_served_by_the_replicas(scale):
    if scale.moved is None:
        pytest.skip("no `python -m app migrate-db` in this tree (the migrate-db branch adds it)")
    with scale.api() as client:
        stored = client.get(f"/api/conversations/{scale.moved.conversation}")
        assert stored.status_code == 200, (stored.text, scale.moved.output)
        messages = stored.json()["messages"]
        assert [m["content"] for m in messages] == ["How hot is the tea?", scale.moved.answer]
        # memory.md and the token stay in chat-data, which the replicas share.
        assert client.get("/api/memory").json()["text"] == "- likes tea"


def test_killing_a_replica_leaves_the_service_answering(scale, fakes):
    llm = fakes[1]
    (victim_address, victim), (survivor_address, survivor) = sorted(
        replicas(scale).items(), key=lambda item: item[1]["Name"]
    )
    with scale.api() as client:
        # The proxy keeps Docker's DNS answer 5 s: past that, this request has it ask again
        # and get both replicas, so the requests below meet the killed one where it was.
        time.sleep(6)
        assert client.get("/api/conversations").status_code == 200
        subprocess.run(["docker", "kill", victim["Id"]], capture_output=True, check=True)
        started = time.monotonic()
        assert victim["Id"] not in {c["Id"] for c in replicas(scale).values()}
        # Each request starts at one of the two at random: some start at the killed one.
        for _ in range(16):
            assert client.get("/api/conversations").status_code == 200
        conversation = new_conversation(client)
        llm.script(Reply(text="Still here."))
        path = f"/api/conversations/{conversation}/chat"
        events = read_events(client, path, {"message": "Anyone?"})
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    assert time.monotonic() - started < 30
    assert survivor["Id"] in {c["Id"] for c in replicas(scale).values()}
    # The proxy found the killed replica gone and sent the request on to the other.
    log = scale.compose("--profile", "scale", "logs", "--no-color", "proxy")
    tried = [re.findall(r"([\d.]+):8080", line) for line in log.splitlines() if "upstream=" in line]
    assert [victim_address, survivor_address] in tried, log[-2000:]
