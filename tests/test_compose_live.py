"""The Compose stack for real (make test-compose, inside make test): built and brought up by
Docker Compose from compose.yaml as a user would, with the fake Brave API, the fake model
server and the page server on the host, where the containers reach them through
host.docker.internal. The images Compose would pull are built locally under the same names
(tests/compose/images.py). Skipped, saying why, where no Docker engine answers (failed,
under CI).

Every container, network and volume of the test's own Compose project is removed at the
end, whatever happened.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from app.api.routes.page import CONTENT_SECURITY_POLICY
from app.search.embedded import free_port
from tests.compose import images
from tests.compose.stack import (
    BRAVE_KEY,
    BUILD_SECONDS,
    Stack,
    bridge_gateway,
    new_conversation,
    port_of,
    read_events,
    remove_everything,
)
from tests.fakes.brave_api import FakeBrave
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall
from tests.fakes.pages import PageServer


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


def test_doctor_is_all_ok_in_the_chat_container(stack):
    out = stack.compose("exec", "-T", "chat", "python", "-m", "app", "doctor")
    assert "FAIL" not in out, out


def test_a_search_reaches_brave_with_the_locale(stack, fakes):
    brave = fakes[0]
    brave.clear()
    results = search_json(stack, "pogoda Warszawa")
    assert results and all(r["engine"] == "braveweb" for r in results)
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
    for name, container in services.items():
        assert container["HostConfig"]["ReadonlyRootfs"] is True, name


def test_the_settings_renderer_is_told_a_key_is_set_never_the_key(stack):
    containers = stack.containers()
    services = {c["Config"]["Labels"]["com.docker.compose.service"]: c for c in containers}
    renderer, searxng = services["searxng-settings"], services["searxng"]
    assert "BRAVE_API_KEY=set" in renderer["Config"]["Env"]
    assert not any(BRAVE_KEY in variable for variable in renderer["Config"]["Env"])
    assert renderer["HostConfig"]["NetworkMode"] == "none"
    assert f"BRAVE_API_KEY={BRAVE_KEY}" in searxng["Config"]["Env"]  # our engine's


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
    assert stack.connects("chat", "llama", 8080, "llm")
    assert not stack.connects("searxng", "llama", 8080, "llm")
    with stack.api() as client:
        conversation = new_conversation(client, web_search=False, web_fetch=False)
        path = f"/api/conversations/{conversation}/chat"
        events = read_events(client, path, {"message": "Say hello."})
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    assert any(e["type"] == "delta" for e in events)
    stack.compose("--profile", "llm", "down")
    assert not stack.containers()
