"""Shared fixtures: the fake Brave API and a real SearXNG with our engine, on loopback; the
heavy components (tests/components.py) and the tiers they mark."""

from __future__ import annotations

import contextlib
import gc
import http.cookiejar
import io
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import certifi
import httpx
import httpx2
import pytest
import uvicorn
from starlette.testclient import TestClient

from app import config
from app.api.serving import server_config
from app.cli import main
from app.search.embedded import EmbeddedSearxng, free_port
from app.tls import tls_context
from tests import components, node_clients
from tests.browser import browser, opened
from tests.components import require
from tests.fakes.brave_api import FakeBrave
from tests.fakes.llm_server import FakeLLM
from tests.fakes.pages import PageServer
from tests.llama_server import built
from tests.postgres import Postgres, own_cluster
from tests.rewriting import rewrite_before_the_workers

ROOT = Path(__file__).resolve().parent.parent
NO_SEARXNG = "http://127.0.0.1:9"
"""A SearXNG address where nothing listens: for the commands that must not need one."""
SHARED = ROOT.parent / "shared"
API_KEY = "test-key"
SERVER_LOCALE = "pl-PL"
TLS = tls_context(certifi.where())
"""The process's one TLS context, for a test's httpx calls: httpx loads the CA bundle anew
for each client (or `httpx.get`) made without one, about 20 ms of CPU, though most of these
speak plain HTTP on loopback."""


def pytest_configure(config: pytest.Config) -> None:
    for name, text in components.MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    rewrite_before_the_workers(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test marked with its tiers before `-m` selects (hence first); the `long` tests
    first, each to the next free worker (`--maxschedchunk 1` in the Makefile): started last,
    one of them would keep its worker busy after the others had ended."""
    for item in items:
        marked = {mark.name for mark in item.iter_markers()}
        tiers = components.tier_marks(getattr(item, "fixturenames", ()), marked)
        for tier in tiers:
            if tier not in marked:
                item.add_marker(tier)
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_collection_finish() -> None:
    """What collection imported (the app, the clients, the test modules: some 400,000
    objects) lives as long as the run: frozen, the collector's full passes no longer walk
    it again (each took 0.25-0.5 s of CPU, a dozen times a worker)."""
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test of a tier whose component is missing skips (fails, in CI) before any of its
    fixtures start."""
    for component in components.HEAVY:
        if item.get_closest_marker(component.name):
            require(component)


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium, found on PATH (`pytest_runtest_setup` made sure it is there)."""
    found = components.chromium_executable()
    assert found is not None
    return found


@pytest.fixture(scope="session")
def nodejs() -> Path:
    """tests/node with the Node.js MCP clients installed from npm (`pytest_runtest_setup`
    made sure Node.js and npm are there)."""
    return node_clients.installed()


@pytest.fixture(scope="session")
def postgresql() -> None:
    """Debian's PostgreSQL server binaries, for the clusters the tests start: the tier's
    anchor (`pytest_runtest_setup` made sure they are there)."""


@pytest.fixture(scope="session")
def llamacpp(request: pytest.FixtureRequest) -> tuple[Path, Path]:
    """llama-server and the tiny Gemma model, built and assembled once (cached)."""
    return built(request)


@pytest.fixture(scope="session")
def docker() -> None:
    """A Docker engine with the Compose plugin, for the Compose stack's tests: the tier's
    anchor (`pytest_runtest_setup` made sure it answers)."""


def shared_path(*parts: str) -> Path:
    """A path in ../shared, or a skip saying why: a user's own clone has no shared/."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared corpus sits beside the checkout only in CI")
    return path


@pytest.fixture(scope="session")
def brave() -> Iterator[FakeBrave]:
    with FakeBrave(api_key=API_KEY) as fake:
        yield fake


PLANS = tempfile.TemporaryDirectory(prefix="brave-plans-")
"""Each SearXNG's plan file, in a directory of its own under this one, removed when the
worker ends (a test may leave its SearXNG's plan behind for the service it starts)."""


def searxng_env(brave: FakeBrave) -> dict[str, str]:
    """A SearXNG on the fake Brave, writing the plan Brave states into a file of its own."""
    plan = Path(tempfile.mkdtemp(dir=PLANS.name)) / "brave-plan.json"
    return {
        **os.environ,
        "BRAVE_API_URL": brave.url,
        "BRAVE_API_KEY": API_KEY,
        "SEARCH_PLAN_FILE": str(plan),
    }


@pytest.fixture(scope="session")
def searxng(brave: FakeBrave) -> Iterator[EmbeddedSearxng]:
    """A SearXNG whose server-side default language is pl-PL."""
    with EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as instance:
        yield instance


@pytest.fixture
def fresh_searxng(brave: FakeBrave) -> Iterator[EmbeddedSearxng]:
    """A SearXNG of its own, for tests that suspend the engine or leave errors behind."""
    with EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as instance:
        yield instance


SESSION_FAKES = ("brave", "pages", "llm")
"""The session's fakes keep what each test of a worker sent them (requests, queued
failures and replies): a test starts with each one it uses cleared, so what it reads
(`pages.paths()`, `brave.requests`, `llm.requests`) is its own."""


@pytest.fixture(autouse=True)
def clean_fakes(request: pytest.FixtureRequest) -> Iterator[None]:
    for name in SESSION_FAKES:
        if name in request.fixturenames:
            request.getfixturevalue(name).clear()
    yield


@dataclass
class FakeStack:
    """The outside world on loopback, for the benchmarks: a model server, the Brave API,
    web pages, a real SearXNG on that Brave, and a scratch directory."""

    llm: FakeLLM
    brave: FakeBrave
    pages: PageServer
    searxng: EmbeddedSearxng
    scratch: Path


@contextmanager
def fake_stack() -> Iterator[FakeStack]:
    with (
        FakeLLM(models=["fake-model", "fake-small"]) as llm,
        FakeBrave(api_key=API_KEY) as brave,
        PageServer() as pages,
        EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as searxng,
        tempfile.TemporaryDirectory() as scratch,
    ):
        yield FakeStack(llm, brave, pages, searxng, Path(scratch))


def run_cli(*args: str, searxng_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m app ...` as a user runs it, against the given SearXNG."""
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SEARXNG_URL": searxng_url, **env},
        timeout=120,
    )


def run_main(*args: str, searxng_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m app ...` in this process: what `run_cli` gives (exit status, output), from
    the same `main` with the same environment, without a Python to start. For what a command
    does; `run_cli` where the process is the point (its imports, signals, a SearXNG it
    starts and stops, `serve`)."""
    out, err, saved = io.StringIO(), io.StringIO(), dict(os.environ)
    os.environ.update({"SEARXNG_URL": searxng_url, **env})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            with contextlib.chdir(ROOT):
                # In a thread of its own, as in a process of its own: Playwright's sync API
                # keeps an event loop running in the main thread once a browser test ran,
                # and a command's asyncio.run refuses to start beside it.
                with ThreadPoolExecutor(max_workers=1) as thread:
                    try:
                        status = thread.submit(main, list(args)).result()
                    except SystemExit as exc:  # argparse's refusals, the tools' arguments
                        status = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(
        ["python", "-m", "app", *args], status, out.getvalue(), err.getvalue()
    )


class RefuseCookies(http.cookiejar.DefaultCookiePolicy):
    """`chat.http` keeps no cookies, like one-off `curl` calls: a test that signs in says so
    with a client of its own (`chat.client()`)."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


class InProcess(httpx.BaseTransport):
    """httpx's requests handed to the app by Starlette's test transport, which runs it on the
    event loop of a started `TestClient`. That transport speaks httpx2 (Starlette's fork), so
    each request and response is carried across; closing one client leaves the transport
    open for the others (closing it would cut their responses short)."""

    def __init__(self, transport: httpx2.BaseTransport) -> None:
        self.transport = transport

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        carried = httpx2.Request(
            request.method, str(request.url), headers=request.headers.raw, content=request.read()
        )
        response = self.transport.handle_request(carried)
        return httpx.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=Relayed(response.stream),
            request=request,
        )


class Relayed(httpx.SyncByteStream):
    """A response body as the app sends it, chunk by chunk; closed early, the app's task is
    cancelled."""

    def __init__(self, stream: httpx2.SyncByteStream) -> None:
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        yield from self.stream

    def close(self) -> None:
        self.stream.close()


class ChatService:
    """The chat service configured like a user would, talked to through `http`, a client
    whose paths are relative to the service's loopback address.

    On a socket (the default) it is uvicorn on a loopback port, in a thread. With
    `socket=False` it is the same app in-process: httpx hands each request to the app, on an
    event loop that lives as long as the service (its lifespan runs at start and stop), and
    the app sees what a local browser's request carries (Host 127.0.0.1:port, client
    127.0.0.1), but nothing listens on `url`. tests/README.md says which tests need which."""

    def __init__(self, env: dict[str, str], searxng_url: str, *, socket: bool = True) -> None:
        # Imported here, not with this module: pytest's own process under xdist (which runs
        # no test) and test_tiers' collections would import the whole app for nothing.
        from app.api.factory import create_app

        self.settings = config.load(env)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = app = create_app(self.settings, searxng_url)
        self.socket = socket
        self.server: uvicorn.Server | None = None
        self.in_process: TestClient | None = None
        if socket:
            # As `serve` listens: its limits, forwarded headers only from TRUSTED_PROXIES.
            self.server = uvicorn.Server(
                server_config(app, self.settings, "127.0.0.1", self.port, log_level="warning")
            )
            self.thread = threading.Thread(target=self.server.run, daemon=True)
            self.transport: httpx.BaseTransport | None = None  # a connection pool each client
        else:
            # As uvicorn would: a 500 for the app's own failures, not an exception in the test.
            self.in_process = TestClient(
                app, base_url=self.url, raise_server_exceptions=False, client=("127.0.0.1", 50000)
            )
            self.transport = InProcess(self.in_process._transport)
        self.http = self.client(cookies=http.cookiejar.CookieJar(RefuseCookies()))

    def client(self, **options: Any) -> httpx.Client:
        """A client of this service with a cookie jar of its own (a browser tab, for one)."""
        # httpx's own defaults for the rest (no redirects followed, its User-Agent), as the
        # tests' bare httpx calls had them; 30 s for the turns that search and fetch. The
        # process's one TLS context: a client of its own would load the CA bundle again.
        return httpx.Client(
            base_url=self.url,
            transport=self.transport,
            timeout=30,
            verify=TLS,
            **options,
        )

    def start(self) -> ChatService:
        if self.in_process is not None:
            self.in_process.__enter__()
            return self
        assert self.server is not None
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the chat service did not start"
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.http.close()
        if self.in_process is not None:
            self.in_process.__exit__(None, None, None)
            return
        assert self.server is not None
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(models=["fake-model", "fake-small"]) as fake:
        yield fake


@pytest.fixture(scope="session")
def pages() -> Iterator[PageServer]:
    with PageServer() as server:
        yield server


def chat_env(
    llm: FakeLLM, tmp_path: Path, pages: PageServer | None = None, **extra: str
) -> dict[str, str]:
    env = {
        **os.environ,
        "LLM_BASE_URL": llm.api_base,
        "MODELS": "fake-model,fake-small",
        "DEFAULT_MODEL": "fake-model",
        "SUMMARY_MODEL": "fake-small",
        "DATA_DIR": str(tmp_path / "data"),
        "SEARCH_LOCALE": "pl-PL",
        "AUTH_TOKEN": "",
    }
    if pages is not None:
        env["FETCH_ALLOW_HOSTS"] = pages.host
    env.update(extra)
    return env


def on_socket(request: pytest.FixtureRequest) -> bool:
    """Whether the test needs the service on a real socket: Chromium loads it, or the test
    says so with the `socket` mark (tests/README.md lists why)."""
    marked = request.node.get_closest_marker("socket") is not None
    return marked or "browser" in request.fixturenames


@contextmanager
def service_for(
    request: pytest.FixtureRequest, env: dict[str, str], searxng_url: str
) -> Iterator[ChatService]:
    """A started service of the kind the test needs, stopped after it."""
    service = ChatService(env, searxng_url, socket=on_socket(request)).start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture
def chat(request, llm, pages, searxng, brave, tmp_path) -> Iterator[ChatService]:
    """A chat service with its own data directory, on the shared fakes: in-process, or on a
    loopback socket for a test that uses the browser or has the `socket` mark."""
    with service_for(request, chat_env(llm, tmp_path, pages), searxng.url) as service:
        yield service


@pytest.fixture
def auth_token() -> str:
    """The AUTH_TOKEN of `guarded`; a module may define its own."""
    return "s3cret-token-for-the-tests-1234567890"


@pytest.fixture
def guarded(request, llm, pages, searxng, brave, tmp_path, auth_token) -> Iterator[ChatService]:
    """The `chat` service with an access token (`auth_token`), of the same kind."""
    env = chat_env(llm, tmp_path, pages, AUTH_TOKEN=auth_token)
    with service_for(request, env, searxng.url) as service:
        yield service


@pytest.fixture
def page(browser, chat):
    """The chat page in a fresh Chromium context, on a chat service of its own."""
    with opened(browser, chat.url) as chat_page:
        yield chat_page


__all__ = ["browser"]  # a fixture, imported to be shared


@pytest.fixture(scope="session")
def postgres_server(postgresql: None) -> Iterator[Postgres]:
    """One PostgreSQL cluster for the run (tests/postgres.py)."""
    with own_cluster() as server:
        yield server


@pytest.fixture
def own_postgres(postgresql: None) -> Iterator[Postgres]:
    """A PostgreSQL of the test's own, to stop, kill and start again."""
    with own_cluster() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: Postgres, request: pytest.FixtureRequest) -> str:
    """The URL of a new empty database, for one test."""
    if not request.node.get_closest_marker("postgresql"):
        # Reached through getfixturevalue, unseen by the tiers: make check would run it.
        pytest.fail("take the `backend` fixture, whose postgresql parameter marks the tier")
    return new_database(postgres_server)


def new_database(server: Postgres) -> str:
    """The URL of a new empty database on that cluster."""
    return server.create(f"test_{os.urandom(6).hex()}")


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]
"""The storage backends, as a fixture's parameters (PostgreSQL's marks its tier): `backend`,
and a module's fixture of a wider scope (test_isolation's `bobs_household`)."""


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each storage test runs on both backends (PostgreSQL's in its tier)."""
    return str(request.param)


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest) -> str:
    """DATABASE_URL for the backend: empty (SQLite in DATA_DIR) or a new PostgreSQL
    database."""
    return str(request.getfixturevalue("postgres_url")) if backend == "postgresql" else ""


@pytest.fixture
def chat_on_backend(
    request, llm, pages, searxng, brave, tmp_path, database_url
) -> Iterator[ChatService]:
    """`chat` on the storage backend of the test: each test that takes it runs on both."""
    env = chat_env(llm, tmp_path, pages, DATABASE_URL=database_url)
    with service_for(request, env, searxng.url) as service:
        yield service


@contextmanager
def two_replicas(env: dict[str, str], searxng_url: str) -> Iterator[list[ChatService]]:
    """Two replicas of one database (one DATA_DIR's chat.db, or one PostgreSQL: the env's
    DATABASE_URL), each on a socket, stopped after."""
    started = [ChatService(env, searxng_url).start() for _ in range(2)]
    try:
        yield started
    finally:
        for service in started:
            service.stop()


def store_of(data_dir: Path, database_url: str) -> Path | str:
    """What app.store's Database opens for these settings (DATA_DIR's chat.db or the URL)."""
    return database_url or data_dir / "chat.db"
