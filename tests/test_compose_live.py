"""The Compose stack for real (make test-compose, inside make test): built and brought up by
Docker Compose from compose.yaml as a user would, with the fake Brave API, the fake model
server and the page server on the host, where the containers reach them through
host.docker.internal. The images Compose would pull are built locally under the same names
(tests/compose/images.py). Skipped, saying why, where no Docker engine answers.

Every container, network and volume of the test's own Compose project is removed at the
end, whatever happened.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from app.api.routes.page import CONTENT_SECURITY_POLICY
from app.search.embedded import free_port
from tests.compose import images
from tests.fakes.brave_api import FakeBrave
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall
from tests.fakes.pages import PageServer

ROOT = Path(__file__).resolve().parent.parent
OVERRIDE = ROOT / "tests" / "compose" / "compose.test.yaml"
BRAVE_KEY = "compose-test-key"
UP_SECONDS = 300
"""How long `up --wait` may take once the images are built (measured: under a minute)."""
BUILD_SECONDS = 1200
"""How long building the stand-ins and the chat image may take (measured: a few minutes)."""


def bridge_gateway() -> str:
    """The host's address on Docker's default bridge: what host-gateway resolves to."""
    done = subprocess.run(
        [
            "docker",
            "network",
            "inspect",
            "bridge",
            "--format",
            "{{(index .IPAM.Config 0).Gateway}}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@dataclass
class Stack:
    """One Compose project of the test's own, driven by the docker CLI."""

    project: str
    env_file: Path
    settings: dict[str, str]
    port: int
    token: str
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_env(self, **changes: str) -> None:
        self.settings.update(changes)
        # Single quotes keep a value as written (MODEL_PARAMS' JSON has double quotes).
        lines = [f"{k}='{v}'\n" if '"' in v else f"{k}={v}\n" for k, v in self.settings.items()]
        self.env_file.write_text("".join(lines))

    def compose(self, *args: str, timeout: float = UP_SECONDS, check: bool = True) -> str:
        command = ["docker", "compose", "-p", self.project, "--project-directory", str(ROOT)]
        command += ["-f", str(ROOT / "compose.yaml"), "-f", str(OVERRIDE)]
        command += ["--env-file", str(self.env_file), *args]
        env = {**os.environ, "CA_BUNDLE": str(images.CA_BUNDLE)}
        env["TEST_BUILD_STAMP"] = self.settings.get("TEST_BUILD_STAMP", "0")
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        if check and done.returncode != 0:
            raise AssertionError(
                f"`docker compose {' '.join(args)}` exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n{self.logs()}"
            )
        return done.stdout

    def logs(self) -> str:
        command = ["docker", "compose", "-p", self.project, "logs", "--no-color", "--tail", "40"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        return f"--- the stack's logs:\n{done.stdout[-6000:]}{done.stderr[-1000:]}"

    def up(self, *args: str, label: str, profile: str | None = None) -> None:
        started = time.monotonic()
        options = ["--profile", profile] if profile else []  # Compose's own, before `up`
        self.compose(*options, "up", "-d", "--wait", "--wait-timeout", str(UP_SECONDS), *args)
        self.timings[label] = round(time.monotonic() - started, 1)

    def api(self, token: str | None = "") -> httpx.Client:
        """A client of the published port; the stack's token unless told otherwise."""
        token = self.token if token == "" else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def containers(self) -> list[dict]:
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        if not ids:
            return []
        out = subprocess.run(
            ["docker", "inspect", *ids], capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout)


def remove_everything(project: str) -> None:
    """Containers, networks and volumes of the project, even when `down` could not run."""
    label = f"label=com.docker.compose.project={project}"
    for kind, listing in (
        ("container", ["docker", "ps", "-aq", "--filter", label]),
        ("network", ["docker", "network", "ls", "-q", "--filter", label]),
        ("volume", ["docker", "volume", "ls", "-q", "--filter", label]),
    ):
        ids = subprocess.run(listing, capture_output=True, text=True).stdout.split()
        if ids:
            force = ["-f"] if kind != "network" else []
            subprocess.run(["docker", kind, "rm", *force, *ids], capture_output=True)


@pytest.fixture(scope="module")
def fakes(docker: None) -> Iterator[tuple[FakeBrave, FakeLLM, PageServer]]:
    host = bridge_gateway()
    brave, llm, pages = FakeBrave(api_key=BRAVE_KEY), FakeLLM(models=["fake-model"]), PageServer()
    for fake in (brave, llm, pages):
        fake.start(host=host)
    try:
        yield brave, llm, pages
    finally:
        for fake in (brave, llm, pages):
            fake.stop()


def port_of(fake: FakeBrave | FakeLLM | PageServer) -> int:
    return int(httpx.URL(fake.url).port or 80)


@pytest.fixture(scope="module")
def stack(fakes, tmp_path_factory) -> Iterator[Stack]:
    brave, llm, pages = fakes
    project = f"psc-test-{uuid.uuid4().hex[:8]}"
    work = tmp_path_factory.mktemp("compose")
    stack = Stack(project, work / ".env", {}, free_port(), secrets.token_hex(16))
    gateway_name = "host.docker.internal"
    stack.write_env(
        SEARXNG_SECRET=secrets.token_hex(32),
        BRAVE_API_KEY=BRAVE_KEY,
        BRAVE_API_URL=f"http://{gateway_name}:{port_of(brave)}",
        SEARCH_LOCALE="pl-PL",
        COMPOSE_LLM_BASE_URL=f"http://{gateway_name}:{port_of(llm)}/v1",
        MODELS="fake-model",
        DEFAULT_MODEL="fake-model",
        FETCH_ALLOW_HOSTS=f"{gateway_name}:{port_of(pages)}",
        AUTH_TOKEN=stack.token,
        ALLOWED_HOSTS="chat.lan",
        CHAT_PORT=str(stack.port),
    )
    try:
        stack.timings.update(images.ensure_all(None))
        started = time.monotonic()
        stack.compose("build", timeout=BUILD_SECONDS)
        stack.timings["chat image build"] = round(time.monotonic() - started, 1)
        stack.up("--build", label="first up to healthy")
        yield stack
    finally:
        report = f"Compose timings (s): {json.dumps(stack.timings)}\n{image_sizes()}\n"
        print(f"\n{report}")
        (images.cache_dir() / "last-run.txt").write_text(report)
        stack.compose("--profile", "llm", "down", "-v", "--remove-orphans", check=False)
        remove_everything(project)
        # The images the rebuild test replaced, left without a name.
        prune = [
            "docker",
            "image",
            "prune",
            "-f",
            "--filter",
            "label=org.private-search.test-build",
        ]
        subprocess.run(prune, capture_output=True)


def image_sizes() -> str:
    names = [
        "private-search-chat:local",
        images.BASE_IMAGE,
        *vars(images.compose_images()).values(),
    ]
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", *names],
        capture_output=True,
        text=True,
    )
    sizes = [
        f"{n}: {int(s) / 1e6:.0f} MB" for n, s in zip(names, done.stdout.split(), strict=False)
    ]
    return "Image sizes: " + ", ".join(sizes)


def search_json(stack: Stack, query: str) -> list[dict]:
    out = stack.compose("exec", "-T", "chat", "python", "-m", "app", "search", query, "--json")
    return json.loads(out)


def read_events(client: httpx.Client, path: str, body: dict) -> list[dict]:
    events = []
    with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    return events


def new_conversation(client: httpx.Client, **settings: object) -> str:
    response = client.post("/api/conversations", json={"settings": settings})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_doctor_is_all_ok_in_the_chat_container(stack):
    out = stack.compose("exec", "-T", "chat", "python", "-m", "app", "doctor")
    assert "FAIL" not in out, out


def test_a_search_reaches_brave_with_the_locale(stack, fakes):
    brave = fakes[0]
    brave.clear()
    results = search_json(stack, "pogoda Warszawa")
    assert results and all(r["engine"] == "braveapi" for r in results)
    sent = brave.requests[-1].params
    assert (sent.get("country"), sent.get("search_lang")) == ("PL", "pl"), sent


def test_a_turn_searches_reads_a_page_and_is_stored(stack, fakes):
    _, llm, pages = fakes
    article = f"http://host.docker.internal:{port_of(pages)}/article"
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "python asyncio"})]),
        Reply(tool_calls=[ToolCall("web_fetch", {"url": article})]),
        Reply(text="Asyncio runs coroutines on an event loop [1]."),
    )
    with stack.api() as client:
        conversation = new_conversation(client)
        path = f"/api/conversations/{conversation}/chat"
        events = read_events(client, path, {"message": f"How does asyncio work? See {article}"})
        kinds = [e["type"] for e in events]
        assert "search" in kinds and "fetch" in kinds and kinds[-1] == "done", events[-3:]
        fetch = next(e for e in events if e["type"] == "fetch")
        assert fetch["url"] == article and fetch["chars"] > 0, fetch
        stored = client.get(f"/api/conversations/{conversation}").json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["content"] == "Asyncio runs coroutines on an event loop [1]."


def test_the_api_without_the_token_is_refused(stack):
    with stack.api(token=None) as client:
        assert client.get("/api/conversations").status_code == 401
    with stack.api() as client:
        assert client.get("/api/conversations").status_code == 200


def test_a_host_named_in_allowed_hosts_is_served(stack):
    """ALLOWED_HOSTS of .env reaches the container (it used to answer 421)."""
    with stack.api() as client:
        assert client.get("/healthz", headers={"Host": "chat.lan"}).status_code == 200
        assert client.get("/healthz", headers={"Host": "other.lan"}).status_code == 421


def test_the_page_and_its_assets_answer_with_their_csp(stack):
    with stack.api(token=None) as client:
        for path in ("/", "/static/js/main.js"):
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
            assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


def test_searxng_is_not_published_and_nothing_runs_as_root(stack):
    containers = stack.containers()
    services = {c["Config"]["Labels"]["com.docker.compose.service"]: c for c in containers}
    assert {"searxng-settings", "searxng", "chat"} <= set(services), sorted(services)
    published = services["searxng"]["NetworkSettings"]["Ports"] or {}
    assert all(not bindings for bindings in published.values()), published
    for name, container in services.items():
        user = container["Config"]["User"]
        assert user and user.split(":")[0] not in ("root", "0"), (name, user)
    for name in ("searxng", "searxng-settings"):
        assert services[name]["HostConfig"]["CapDrop"] == ["ALL"], name


def test_the_readme_locale_change_reaches_brave(stack, fakes):
    brave = fakes[0]
    with stack.api() as client:
        before = new_conversation(client)
    stack.write_env(SEARCH_LOCALE="de-DE")
    stack.up("--force-recreate", "searxng-settings", "searxng", "chat", label="locale change")
    brave.clear()
    search_json(stack, "wetter berlin")
    sent = brave.requests[-1].params
    assert (sent.get("country"), sent.get("search_lang")) == ("DE", "de"), sent
    with stack.api() as client:
        after = new_conversation(client)
        locales = [
            client.get(f"/api/conversations/{c}").json()["settings"]["search_locale"]
            for c in (before, after)
        ]
    # An existing conversation keeps the locale it was created with.
    assert locales == ["pl-PL", "de-DE"], locales


def test_down_then_up_keeps_conversations_and_memory(stack):
    with stack.api() as client:
        conversation = new_conversation(client)
        assert client.put("/api/memory", json={"text": "- likes tea"}).status_code == 200
    stack.compose("down")
    stack.up(label="up after down")
    with stack.api() as client:
        assert client.get(f"/api/conversations/{conversation}").status_code == 200
        assert client.get("/api/memory").json()["text"] == "- likes tea"


def test_a_rebuilt_image_keeps_the_data_volume(stack):
    with stack.api() as client:
        conversation = new_conversation(client)
    image = lambda: subprocess.run(  # noqa: E731
        ["docker", "image", "inspect", "--format", "{{.Id}}", "private-search-chat:local"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    old = image()
    stack.settings["TEST_BUILD_STAMP"] = uuid.uuid4().hex
    stack.compose("build", timeout=BUILD_SECONDS)
    assert image() != old
    stack.compose("down")
    stack.up(label="up after rebuild")
    with stack.api() as client:
        assert client.get(f"/api/conversations/{conversation}").status_code == 200


def test_the_llm_profile_answers_a_turn_through_llama(stack, llamacpp):
    llama_server, model = llamacpp  # what tests/test_llama_server.py builds and runs
    started = time.monotonic()
    images.ensure_llama(
        images.compose_images().llama, llama_server, images.cache_dir() / "images.log"
    )
    stack.timings["llama stand-in"] = round(time.monotonic() - started, 1)
    stack.write_env(
        LLAMA_MODEL_DIR=str(model.parent),
        LLAMA_MODEL_FILE=model.name,
        LLAMA_CTX_SIZE="2048",
        COMPOSE_LLM_BASE_URL="http://llama:8080/v1",
        MODELS="local",
        DEFAULT_MODEL="local",
        MAX_COMPLETION_TOKENS="24",
        MODEL_PARAMS=json.dumps({"local": {"temperature": 0}}),
    )
    stack.up("--force-recreate", "llama", "chat", label="llm profile up", profile="llm")
    llama = next(
        c
        for c in stack.containers()
        if c["Config"]["Labels"]["com.docker.compose.service"] == "llama"
    )
    assert llama["Config"]["User"] == "977:977" and llama["HostConfig"]["CapDrop"] == ["ALL"]
    with stack.api() as client:
        conversation = new_conversation(client, web_search=False, web_fetch=False)
        path = f"/api/conversations/{conversation}/chat"
        events = read_events(client, path, {"message": "Say hello."})
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    assert any(e["type"] == "delta" for e in events)
    stack.compose("--profile", "llm", "down")
    assert not stack.containers()
