"""What the service benchmarks share. The chat service runs as its own process and is driven
over HTTP only, so the same benchmark measures whatever storage and turn code is in place;
its CPU time and memory come from /proc. The outside world is the usual fakes, in this
process: a model server that answers each request from its content (so many conversations can
run at once), the Brave API behind a real SearXNG (its own process), and web pages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.search.embedded import EmbeddedSearxng, free_port  # noqa: E402
from tests.conftest import API_KEY, ROOT, SERVER_LOCALE, chat_env, searxng_env  # noqa: E402
from tests.fakes.brave_api import FakeBrave  # noqa: E402
from tests.fakes.llm_server import FakeLLM, Recorded, Reply, ToolCall  # noqa: E402
from tests.fakes.loopback import LoopbackFake, LoopbackHandler  # noqa: E402
from tests.fakes.pages import PageServer  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
T = TypeVar("T")
SEARCH = "[search]"
FETCH = "[fetch]"  # followed by the address to read
MODEL = "fake-model"  # DEFAULT_MODEL of tests.conftest.chat_env
SUMMARY = json.dumps({"summary": "Earlier the user asked about pierogi.", "facts": []})


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def machine_load() -> str:
    """The load average, to read next to the figures: the machine may be shared."""
    return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def stolen_seconds() -> float:
    """CPU time the hypervisor gave other machines while this one's vCPUs wanted it (the
    steal column of /proc/stat, all CPUs): on a shared host, a run with much of it is a
    run on a slower machine."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) / CLOCK_TICKS


def code_version(root: Path) -> str:
    """Which code was measured: the commit and the app files changed since, or for a copy
    (see --app-root) its path and the commit named in its COMMIT file."""
    if (root / "COMMIT").exists():
        return f"copy of commit {(root / 'COMMIT').read_text().strip()} at {root}"
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "status", "--short", "app"], cwd=root, capture_output=True, text=True
    ).stdout.split("\n")
    dirty = [line[3:] for line in changed if line.strip()]
    return f"commit {head}" + (f" + uncommitted changes in {', '.join(dirty)}" if dirty else "")


def app_root_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app-root",
        type=Path,
        default=ROOT,
        help="run the service from this copy of the project (default: this checkout), e.g. "
        "one made with `git archive HEAD | tar -x -C DIR`, to measure a commit while the "
        "checkout is being edited",
    )


# --------------------------------------------------------------------------------------------
# The fakes


class ScriptedLLM(FakeLLM):
    """A fake model server whose answer depends on the request, not on arrival order.

    The last message decides: a user message carrying SEARCH or FETCH gets that tool call
    (if the tool is offered), anything else gets `answer`; a non-streamed request is a
    compression and gets a summary. First requests of a turn are kept by their user message,
    so a benchmark can send the same payload to this server directly."""

    def __init__(self, answer: Reply) -> None:
        super().__init__(models=["fake-model", "fake-small"])
        self.answer = answer
        self.first_requests: dict[str, dict] = {}
        self._asked = threading.local()

    def _record(self, body: dict, headers: dict[str, str], path: str, port: int) -> Recorded:
        # Called on the request's own thread just before _next_reply, which reads it back.
        self._asked.body = body
        messages = body.get("messages") or [{}]
        if messages[-1].get("role") == "user":
            self.first_requests[str(messages[-1].get("content"))] = body
        return super()._record(body, headers, path, port)

    def _next_reply(self) -> Reply:
        body = self._asked.body
        if not body.get("stream"):
            return Reply(text=SUMMARY)
        last = (body.get("messages") or [{}])[-1]
        offered = {tool["function"]["name"] for tool in body.get("tools") or []}
        text = str(last.get("content") or "") if last.get("role") == "user" else ""
        if SEARCH in text and "web_search" in offered:
            query = text.split(SEARCH, 1)[1].strip()[:80] or "pierogi"
            return self._paced(ToolCall("web_search", {"query": query}))
        if FETCH in text and "web_fetch" in offered:
            url = text.split(FETCH, 1)[1].split()[0]
            return self._paced(ToolCall("web_fetch", {"url": url}))
        return self.answer

    def _paced(self, call: ToolCall) -> Reply:
        return Reply(tool_calls=[call], chunk_delay=self.answer.chunk_delay)


class _LocalPagesHandler(LoopbackHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        body = self.server.fake.page(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class LocalPages(LoopbackFake):
    """A local web on loopback: `pages` (HTML by path, "/name"), 404 elsewhere; `url` its
    base, `host` its ``host:port`` for FETCH_ALLOW_HOSTS."""

    _handler_class = _LocalPagesHandler
    _thread_name = "local-pages"

    def __init__(self, pages: dict[str, bytes] | None = None) -> None:
        super().__init__()
        self.pages = pages or {}
        self.host = ""

    def page(self, path: str) -> bytes | None:
        return self.pages.get(path)

    def _serving_at(self, host: str, port: int) -> str:
        self.host = f"{host}:{port}"
        return f"http://{self.host}"


class BigPage(LocalPages):
    """One page of `size` bytes of ordinary HTML at every path: articles of paragraphs and
    links between a navigation bar and a footer, the work a real long page gives the
    extractor."""

    def __init__(self, size: int = 3_000_000) -> None:
        super().__init__()
        self.body = big_html(size)

    def page(self, path: str) -> bytes | None:
        return self.body


def big_html(size: int) -> bytes:
    nav = "".join(f'<li><a href="/section/{n}">Section {n}</a></li>' for n in range(40))
    head = f"<!doctype html><html><head><title>A long page</title></head><body><ul>{nav}</ul>"
    parts = [head]
    total, n = len(head), 0
    while total < size:
        n += 1
        section = (
            f"<div class='post'><h2>Part {n}: the pierogi of Łódź</h2>"
            + "".join(
                f"<p>Paragraph {k} of part {n}: dough is rolled thin, filled with potato "
                f"and cheese, folded, boiled for four minutes and fried in butter until golden. "
                f'See <a href="/part/{n}/{k}">the step</a> and <em>the note</em>.</p>'
                for k in range(8)
            )
            + "</div>"
        )
        parts.append(section)
        total += len(section.encode())
    parts.append("<footer>Copyright nobody.</footer></body></html>")
    return "".join(parts).encode()


@dataclass
class Stack:
    llm: ScriptedLLM
    brave: FakeBrave
    pages: PageServer
    big_page: BigPage
    searxng: EmbeddedSearxng
    scratch: Path

    def service_env(self, name: str, **extra: str) -> dict[str, str]:
        """The service's environment, with a data directory of its own under `name`."""
        hosts = f"{self.pages.host},{self.big_page.host}"
        env = chat_env(self.llm, self.scratch / name, self.pages, FETCH_ALLOW_HOSTS=hosts)
        return {**env, "SEARXNG_URL": self.searxng.url, **extra}


@contextmanager
def bench_stack(answer: Reply, brave_api: type[FakeBrave] = FakeBrave) -> Iterator[Stack]:
    with (
        ScriptedLLM(answer) as llm,
        brave_api(api_key=API_KEY) as brave,
        PageServer() as pages,
        BigPage() as big_page,
        EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as searxng,
        tempfile.TemporaryDirectory() as scratch,
    ):
        yield Stack(llm, brave, pages, big_page, searxng, Path(scratch))


GENERATOR_NICENESS = 10


def run_yielding(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coroutine)` on a thread of lower priority (nice 10), and the fakes'
    threads lowered too: on two shared cores the load generator and the fakes otherwise
    take the CPU the service needs, and the service's figures (its loop's lag, its time
    to first token) measure the scheduler's choices, not the service. The service and
    SearXNG, started from the main thread, keep the normal priority."""
    for thread in Path("/proc/self/task").iterdir():
        if int(thread.name) != threading.get_native_id():
            # A fake's thread per connection may end between the listing and this call.
            with suppress(ProcessLookupError):
                os.setpriority(os.PRIO_PROCESS, int(thread.name), GENERATOR_NICENESS)
    result: list[T] = []
    failure: list[BaseException] = []

    def generate() -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), GENERATOR_NICENESS)
        try:
            result.append(asyncio.run(coroutine))
        except BaseException as exc:  # handed to the caller
            failure.append(exc)

    generator = threading.Thread(target=generate, name="load generator")
    generator.start()
    generator.join()
    if failure:
        raise failure[0]
    return result[0]


# --------------------------------------------------------------------------------------------
# The service, as its own process


@dataclass
class Service:
    url: str
    process: subprocess.Popen

    def cpu_seconds(self) -> float:
        """utime + stime of the service's process and its worker processes (extraction)."""
        return sum(self.cpu_times())

    def cpu_times(self) -> tuple[float, float]:
        """(utime, stime) in seconds of the service's process, all its threads included,
        and of its worker processes alive now (each started once and kept)."""
        return process_cpu_times(self.process.pid)

    def memory_mb(self) -> dict[str, float]:
        """Resident memory now (VmRSS) and at its peak (VmHWM), in MB."""
        found = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0]) / 1024
        return found


def process_cpu_times(pid: int) -> tuple[float, float]:
    """(utime, stime) in seconds of process `pid` (all its threads) and of its children
    alive now; (0, 0) for a process that is gone."""
    user = system = 0.0
    try:
        family = (pid, *children(pid))
    except FileNotFoundError:
        return user, system
    for member in family:
        try:
            stat = Path(f"/proc/{member}/stat").read_text()
        except FileNotFoundError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        user += int(fields[11]) / CLOCK_TICKS  # stat's 14 and 15
        system += int(fields[12]) / CLOCK_TICKS
    return user, system


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with suppress(FileNotFoundError):  # a thread that ended since the listing
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


SERVE = ["app", "serve"]
FLOOR = ["uvicorn", "bench.floor_app:app", "--log-level", "warning"]
FLOOR += ["--loop", "uvloop", "--http", "httptools"]  # as app/cli/serve.py serves


def service_log() -> int:
    """Where the service's log goes: BENCH_SERVICE_LOG=path keeps it (appended), e.g. for
    LOOP_LAG_PROBE's reports of what held the event loop."""
    path = os.environ.get("BENCH_SERVICE_LOG")
    if not path:
        return subprocess.DEVNULL
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def wait_healthy(url: str, process: subprocess.Popen, seconds: float) -> bool:
    """Whether `url`/healthz answered 200 within `seconds`, while `process` kept running."""
    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    return False


@contextmanager
def service(
    env: dict[str, str],
    root: Path = ROOT,
    *,
    wrapper: list[str] | None = None,
    module: list[str] = SERVE,
    port: int | None = None,
) -> Iterator[Service]:
    """`python -m app serve` (or another `module` taking --port and serving /healthz) from
    `root` in its own process, optionally under `wrapper`, e.g. a profiler, on `port` (a
    free one by default); stopped with SIGTERM, as a supervisor stops it, so a profiler
    writes."""
    port = port or free_port()
    command = [*(wrapper or [sys.executable]), "-m", *module, "--port", str(port)]
    log = service_log()
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=log)
    if log != subprocess.DEVNULL:
        os.close(log)  # the service has its own copy
    url = f"http://127.0.0.1:{port}"
    if not wait_healthy(url, process, 60):
        process.kill()
        raise RuntimeError(f"the service did not start: {' '.join(command)}")
    try:
        yield Service(url, process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


# --------------------------------------------------------------------------------------------
# The client's side


def client() -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=500, max_keepalive_connections=500)
    return httpx.AsyncClient(timeout=120, limits=limits)


@dataclass
class Turn:
    """One chat request as the client saw it; times in seconds from sending it."""

    status: int
    first_delta: float | None = None
    last_delta: float | None = None
    done: float | None = None
    text: str = ""
    types: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)  # search and fetch events
    error: dict[str, Any] | None = None
    started: float = 0.0  # time.perf_counter() when sent


async def chat_turn(http: httpx.AsyncClient, url: str, conversation: str, message: str) -> Turn:
    """One turn as the page sends it: the message and the picker's model."""
    started = time.perf_counter()
    path = f"{url}/api/conversations/{conversation}/chat"
    body = {"message": message, "model": MODEL}
    async with http.stream("POST", path, json=body) as response:
        turn = Turn(response.status_code, started=started)
        if response.status_code != 200:
            await response.aread()
            return turn
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            elapsed = time.perf_counter() - started
            turn.types.append(event["type"])
            if event["type"] == "delta":
                turn.first_delta = turn.first_delta or elapsed
                turn.last_delta = elapsed
                turn.text += event["text"]
            elif event["type"] in ("search", "fetch"):
                turn.tools.append(event)
            elif event["type"] == "error":
                turn.error = event
            elif event["type"] == "done":
                turn.done = elapsed
    return turn


async def direct_first_delta(http: httpx.AsyncClient, api_base: str, payload: dict) -> float:
    """Time to the first content delta from the model server itself, for the same payload."""
    started = time.perf_counter()
    async with http.stream("POST", f"{api_base}/chat/completions", json=payload) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                delta = json.loads(line[6:])["choices"]
                if delta and delta[0]["delta"].get("content"):
                    return time.perf_counter() - started
    raise RuntimeError("the model server sent no content")


async def direct_whole(http: httpx.AsyncClient, api_base: str, payload: dict) -> float:
    """Time for the model server's whole streamed answer to the same payload."""
    started = time.perf_counter()
    async with http.stream("POST", f"{api_base}/chat/completions", json=payload) as response:
        async for _ in response.aiter_bytes():
            pass
    return time.perf_counter() - started


async def new_conversation(http: httpx.AsyncClient, url: str, **settings: Any) -> str:
    response = await http.post(f"{url}/api/conversations", json={"settings": settings})
    response.raise_for_status()
    return response.json()["id"]


@dataclass
class LagReading:
    start: float
    end: float
    lag: float
    own: float | None
    """The lag less the loop's waits for a core (None where the system does not count them)."""


@dataclass
class LagWatch:
    """/healthz's loop_lag_ms and loop_lag_own_ms, the worst since the previous call, read
    every `every` seconds, with times from time.perf_counter()."""

    readings: list[LagReading] = field(default_factory=list)
    failures: int = 0
    last_read: float = 0.0

    def read(self, health: dict) -> None:
        now = time.perf_counter()
        own = health.get("loop_lag_own_ms")
        self.readings.append(LagReading(self.last_read, now, health["loop_lag_ms"], own))
        self.last_read = now

    def worst(self, since: float = 0.0, until: float = float("inf")) -> float:
        """The worst lag in readings whose span overlaps [since, until]."""
        return max((r.lag for r in self.overlapping(since, until)), default=0.0)

    def worst_own(self, since: float = 0.0, until: float = float("inf")) -> float | None:
        """The same, less the loop's waits for a core."""
        owns = [r.own for r in self.overlapping(since, until)]
        return None if None in owns else max(owns, default=0.0)

    def overlapping(self, since: float, until: float) -> list[LagReading]:
        return [r for r in self.readings if r.start <= until and r.end >= since]


@asynccontextmanager
async def watching_lag(
    http: httpx.AsyncClient, url: str, every: float = 0.25
) -> AsyncIterator[LagWatch]:
    watch = LagWatch()

    async def poll() -> None:
        while True:
            await asyncio.sleep(every)
            try:
                response = await http.get(f"{url}/healthz")
                watch.read(response.json())
            except (httpx.HTTPError, KeyError, ValueError):
                watch.failures += 1

    await http.get(f"{url}/healthz")  # forget the lag of what came before
    watch.last_read = time.perf_counter()
    task = asyncio.create_task(poll())
    try:
        yield watch
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        response = await http.get(f"{url}/healthz")
        watch.read(response.json())
