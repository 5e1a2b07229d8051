"""A Compose project of a test's own, driven by the docker CLI (tests/test_compose_live.py,
tests/test_compose_scale.py), and what its tests ask of Docker and of the chat API."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.compose import images
from tests.fakes.brave_api import FakeBrave
from tests.fakes.llm_server import FakeLLM
from tests.fakes.pages import PageServer

ROOT = Path(__file__).resolve().parent.parent.parent
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
    files: tuple[Path, ...] = ()
    """Compose files added to compose.yaml, as a user adds them with -f (before the tests'
    own override)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_env(self, **changes: str) -> None:
        self.settings.update(changes)
        # Single quotes keep a value as written (MODEL_PARAMS' JSON has double quotes).
        lines = [f"{k}='{v}'\n" if '"' in v else f"{k}={v}\n" for k, v in self.settings.items()]
        self.env_file.write_text("".join(lines))

    def run(self, *args: str, timeout: float = UP_SECONDS) -> subprocess.CompletedProcess[str]:
        """`docker compose ARGS` on the project, whatever its exit status."""
        command = ["docker", "compose", "-p", self.project, "--project-directory", str(ROOT)]
        command += ["-f", str(ROOT / "compose.yaml")]
        for added in (*self.files, OVERRIDE):
            command += ["-f", str(added)]
        command += ["--env-file", str(self.env_file), *args]
        env = {**os.environ, "CA_BUNDLE": str(images.CA_BUNDLE)}
        env["TEST_BUILD_STAMP"] = self.settings.get("TEST_BUILD_STAMP", "0")
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)

    def connects(self, service: str, host: str, port: int, profile: str | None = None) -> bool:
        """Whether a TCP connection from the service's (first) container to host:port
        succeeds (`profile`: the service's, Compose's own option)."""
        probe = f"import socket; socket.create_connection(({host!r}, {port}), timeout=5)"
        options = ["--profile", profile] if profile else []
        return self.run(*options, "exec", "-T", service, "python", "-c", probe).returncode == 0

    def compose(self, *args: str, timeout: float = UP_SECONDS, check: bool = True) -> str:
        done = self.run(*args, timeout=timeout)
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


def services(stack: Stack) -> dict[str, list[dict]]:
    """The project's containers by service, running or not."""
    found: dict[str, list[dict]] = {}
    for container in stack.containers():
        found.setdefault(container["Config"]["Labels"]["com.docker.compose.service"], []).append(
            container
        )
    return found


def replicas(stack: Stack) -> dict[str, dict]:
    """Each running chat replica by its address on the backend network, where the proxy
    reaches it."""
    running = [c for c in services(stack)["chat-replica"] if c["State"]["Running"]]
    backend = f"{stack.project}_backend"
    return {c["NetworkSettings"]["Networks"][backend]["IPAddress"]: c for c in running}


def answered_by(stack: Stack, request: str) -> list[str]:
    """The replica addresses the proxy's log names for requests whose line has `request`."""
    log = stack.compose("--profile", "scale", "logs", "--no-color", "proxy")
    return [
        address
        for line in log.splitlines()
        if request in line
        for address in re.findall(r"upstream=([\d.]+):8080", line)
    ]


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


def port_of(fake: FakeBrave | FakeLLM | PageServer) -> int:
    return int(httpx.URL(fake.url).port or 80)


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
