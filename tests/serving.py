"""`python -m app serve` as a user runs it, in a process of its own: for the tests whose
behaviour lives in that process (a signal, a SIGKILL, its own SearXNG, what it refuses at
start) or that keep its GIL apart from their clients'. Its output is kept in a log, told
when it does not serve."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import certifi
import httpx

from app.search.embedded import free_port
from app.tls import tls_context
from tests.conftest import ROOT


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_until_healthy(self, timeout: float = 60.0) -> None:
        """Until /healthz answers 200; fails with its log if it exits or never does."""
        reason = until_healthy(self.url, self.process, timeout)
        assert reason is None, f"serve {reason}:\n{self.output()[-3000:]}"

    def stop(self, ending: signal.Signals = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(ending)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def until_healthy(url: str, process: subprocess.Popen, timeout: float = 60.0) -> str | None:
    """None once `url`/healthz answers 200, else why not: the process ended, or the time
    ran out."""
    deadline = time.monotonic() + timeout
    # One client for the polls: a client each would load the CA bundle again (about 30 ms of
    # CPU a poll, a poll every 0.1 s while the service starts).
    with httpx.Client(timeout=2, verify=tls_context(certifi.where())) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return f"exited with {process.returncode}"
            try:
                if client.get(f"{url}/healthz").status_code == 200:
                    return None
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    return f"did not answer {url}/healthz in {timeout:g} s"


def start(
    env: dict[str, str], *args: str, host: str | None = None, log: Path | None = None
) -> Served:
    """`python -m app serve` on a free port (on its own default host unless given), its
    output in `log` (by default beside DATA_DIR), not yet awaited."""
    port = free_port()
    log = log or Path(env["DATA_DIR"]).parent / f"serve-{port}.log"
    where = ["--host", host] if host else []
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", *where, "--port", str(port), *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Served(f"http://127.0.0.1:{port}", process, log)


@contextmanager
def serve(
    env: dict[str, str],
    *args: str,
    host: str | None = None,
    ending: signal.Signals = signal.SIGTERM,
    timeout: float = 60.0,
) -> Iterator[Served]:
    """A service started and healthy, stopped after with `ending` (SIGKILL: as a crash)."""
    served = start(env, *args, host=host)
    try:
        served.wait_until_healthy(timeout)
        yield served
    except httpx.ConnectError as exc:
        told = f"nothing serves {served.url} (exit {served.process.poll()})"
        raise AssertionError(f"{told}:\n{served.output()[-3000:]}") from exc
    finally:
        served.stop(ending)
