"""The scale profile in household mode behind Authelia, for real (make test-compose):
compose.yaml with compose.authelia.yaml, as docs/household.md says to start it, nginx with
deploy/authelia/nginx.conf asking Authelia about each request, two chat replicas on
PostgreSQL. Authelia is the stand-in tests/compose/authelia.Dockerfile builds under the
image's name (it cannot be pulled here); the other images are the suite's stand-ins
(tests/compose/images.py). Each person's conversation has one turn, answered by the fake
model server on the host (a conversation without a message is not listed).

Everything of the test's own Compose project is removed at the end, whatever happened.
"""

from __future__ import annotations

import json
import random
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import yaml
from argon2 import PasswordHasher

from app.search.embedded import free_port
from tests.compose import images
from tests.compose.stack import (
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
from tests.fakes.llm_server import FakeLLM, Reply

ROOT = Path(__file__).resolve().parent.parent
CHAT_HOST = "chat.example.org"
PORTAL = "https://auth.example.org"
COOKIE = "authelia_session"
PEOPLE = {
    "alice": ("Alice", "alice@example.org", "alice's long password"),
    "bob": ("Bob", "bob@example.org", "bob's long password"),
}
PROBE = (
    "import json, sys, urllib.request, urllib.error; "
    "request = urllib.request.Request(sys.argv[1], headers=json.loads(sys.argv[2])); "
    "code = lambda: urllib.request.urlopen(request, timeout=10).status\n"
    "try: print(code())\n"
    "except urllib.error.HTTPError as error: print(error.code)"
)
"""Run in a container of the stack: the status of a GET of argv[1] with the headers of
argv[2] (JSON)."""


@dataclass
class Household:
    stack: Stack
    cookies: dict[str, str]
    """Each person's Authelia session cookie, from signing in at the portal."""
    conversations: dict[str, str]
    """The conversation each person made through nginx."""

    def client(self, person: str | None, **headers: str) -> httpx.Client:
        """A client of the page's name on nginx, with the person's cookie (None: none).
        The cookie is Secure (https in front of nginx), so it is sent by hand here."""
        sent = {"Host": CHAT_HOST, **headers}
        if person is not None:
            sent["Cookie"] = f"{COOKIE}={self.cookies[person]}"
        return httpx.Client(base_url=self.stack.url, headers=sent, timeout=60)


def users_file(path: Path) -> None:
    """Authelia's file backend, the passwords as Argon2id hashes (Authelia's own format)."""
    hasher = PasswordHasher()
    users = {
        name: {"displayname": shown, "email": email, "password": hasher.hash(password)}
        for name, (shown, email, password) in PEOPLE.items()
    }
    path.write_text(yaml.safe_dump({"users": users}))


def sign_in(stack: Stack, person: str) -> str:
    """The portal's sign-in (Authelia's /api/firstfactor, reached through nginx)."""
    password = PEOPLE[person][2]
    with httpx.Client(base_url=stack.url, headers={"Host": "auth.example.org"}) as client:
        response = client.post("/api/firstfactor", json={"username": person, "password": password})
    assert response.status_code == 200, response.text
    # Read from the header: httpx keeps no cookie for example.org from 127.0.0.1.
    return SimpleCookie(response.headers["set-cookie"])[COOKIE].value


@pytest.fixture(scope="module")
def llm(docker: None) -> Iterator[FakeLLM]:
    fake = FakeLLM(models=["fake-model"])
    fake.start(host=bridge_gateway())
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def household(llm: FakeLLM, tmp_path_factory) -> Iterator[Household]:
    project = f"authelia-{uuid.uuid4().hex[:8]}"
    work = tmp_path_factory.mktemp("compose-authelia")
    stack = Stack(
        project,
        work / ".env",
        {},
        free_port(),
        token="",
        files=(ROOT / "compose.authelia.yaml",),
    )
    (work / "secrets").mkdir()
    for name in ("session-secret", "storage-key", "jwt-secret"):
        (work / "secrets" / name).write_text(secrets.token_hex(64))
    users_file(work / "users.yml")
    stack.write_env(
        SEARXNG_SECRET=secrets.token_hex(32),
        COMPOSE_LLM_BASE_URL=f"http://host.docker.internal:{port_of(llm)}/v1",
        MODELS="fake-model",
        DEFAULT_MODEL="fake-model",
        CHAT_PORT=str(stack.port),
        CHAT_REPLICAS="2",
        POSTGRES_PASSWORD=secrets.token_hex(16),
        ALLOWED_HOSTS=CHAT_HOST,
        # A /24 of its own, so that a run beside another cannot take the same one.
        PROXY_NETWORK=f"10.231.{random.randrange(256)}",
        AUTHELIA_USERS_FILE=str(work / "users.yml"),
        AUTHELIA_SECRETS_DIR=str(work / "secrets"),
    )
    started = time.monotonic()
    try:
        stack.timings.update(images.ensure_all(None))
        stack.timings["authelia stand-in"] = images.ensure_authelia()
        built = time.monotonic()
        stack.compose("--profile", "scale", "build", timeout=BUILD_SECONDS)
        stack.timings["chat image build"] = round(time.monotonic() - built, 1)
        stack.up("proxy", label="scale profile behind Authelia up", profile="scale")
        cookies = {person: sign_in(stack, person) for person in PEOPLE}
        made = Household(stack, cookies, {})
        for person in PEOPLE:
            with made.client(person) as client:
                conversation = new_conversation(client)
                llm.script(Reply(text=f"Hello, {person}."))
                path = f"/api/conversations/{conversation}/chat"
                assert read_events(client, path, {"message": "Hello?"})[-1]["type"] == "done"
                made.conversations[person] = conversation
        yield made
    finally:
        stack.timings["whole module"] = round(time.monotonic() - started, 1)
        print(f"\nCompose Authelia timings (s): {json.dumps(stack.timings)}")
        stack.compose("--profile", "scale", "down", "-v", "--remove-orphans", check=False)
        remove_everything(project)


def ids(client: httpx.Client) -> set[str]:
    listed = client.get("/api/conversations")
    assert listed.status_code == 200, listed.text
    return {entry["id"] for entry in listed.json()}


def proxy_lines(stack: Stack, request: str) -> list[str]:
    log = stack.compose("--profile", "scale", "logs", "--no-color", "proxy")
    return [line for line in log.splitlines() if request in line]


def test_without_authelias_cookie_a_request_goes_to_the_portal_not_the_service(household):
    unseen = f"/api/conversations/{uuid.uuid4().hex}"
    with household.client(None) as client:
        for path in ("/", unseen):
            response = client.get(path)
            assert response.status_code == 302, (path, response.text)
            portal = urlsplit(response.headers["location"])
            assert f"{portal.scheme}://{portal.netloc}" == PORTAL
            assert parse_qs(portal.query)["rd"] == [f"https://{CHAT_HOST}{path}"]
        refused = client.post("/api/conversations", json={})
        assert refused.status_code == 302
    # nginx sent none of them on to a replica: no line names one as its upstream.
    (line,) = proxy_lines(household.stack, f"GET {unseen} ")
    assert " 302 " in line and ":8080" not in line, line
    with household.client("alice") as client:
        assert household.conversations["bob"] not in ids(client)


def test_alice_is_served_as_alice_with_her_conversations_only_by_both_replicas(household):
    alice, bob = household.conversations["alice"], household.conversations["bob"]
    with household.client("alice") as client:
        page = client.get("/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        session = client.get("/api/session").json()
        assert (session["household"], session["signed_in"], session["person"]) == (
            True,
            True,
            "Alice",
        )
        # nginx hands requests to the replicas in turn, among those Docker's DNS named at
        # its last answer (asked again every 5 s): a few rounds are allowed.
        deadline = time.monotonic() + 20
        while True:
            for _ in range(6):
                assert ids(client) == {alice}
                assert client.get(f"/api/conversations/{bob}").status_code == 404
            addresses = answered_by(household.stack, "GET /api/conversations ")
            if set(addresses) == set(replicas(household.stack)) or time.monotonic() > deadline:
                break
            time.sleep(2)
    assert set(addresses) == set(replicas(household.stack)), addresses
    with household.client("bob") as client:
        assert ids(client) == {bob}
        assert client.get(f"/api/conversations/{alice}").status_code == 404
        assert client.get("/api/session").json()["person"] == "Bob"


def test_a_clients_own_remote_user_header_is_replaced_by_nginx(household):
    posing = {"Remote-User": "alice", "Remote-Name": "Alice", "Remote-Email": "alice@example.org"}
    with household.client("bob", **posing) as client:
        assert client.get("/api/session").json()["person"] == "Bob"
        assert ids(client) == {household.conversations["bob"]}
    with household.client(None, **posing) as client:
        for path in ("/api/session", "/api/conversations"):
            response = client.get(path)
            assert response.status_code == 302, (path, response.text)
            assert response.headers["location"].startswith(PORTAL)


def test_a_replica_is_reached_only_through_nginx(household):
    stack = household.stack
    found = services(stack)
    proxy = found["proxy"][0]["NetworkSettings"]["Networks"][f"{stack.project}_backend"]
    # From another container on the replicas' network: the replica answers, but the
    # header from there is refused on every path.
    run = ["--profile", "scale", "exec", "-T", "authelia", "python", "-c"]
    as_nginx = {"Host": CHAT_HOST}
    posing = json.dumps({**as_nginx, "Remote-User": "alice"})
    for path in ("/healthz", "/api/conversations", "/"):
        status = stack.compose(*run, PROBE, f"http://chat-replica:8080{path}", posing).strip()
        assert status == "401", (path, status)
    healthz = stack.compose(*run, PROBE, "http://chat-replica:8080/healthz", json.dumps(as_nginx))
    assert healthz.strip() == "200"
    # The refusals are the replicas' own, of the address the probes came from.
    authelia = found["authelia"][0]["NetworkSettings"]["Networks"][f"{stack.project}_backend"]
    log = stack.compose("--profile", "scale", "logs", "--no-color", "chat-replica")
    refused = [line for line in log.splitlines() if "believed only from TRUSTED_PROXIES" in line]
    assert refused and all(f"from {authelia['IPAddress']}:" in line for line in refused), refused
    for replica in found["chat-replica"]:
        # Nothing published on the host, and the one address believed is nginx's.
        assert not any(replica["NetworkSettings"]["Ports"].values()), replica["Name"]
        assert f"TRUSTED_PROXIES={proxy['IPAddress']}" in replica["Config"]["Env"]
