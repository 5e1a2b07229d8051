"""A real PostgreSQL for the tests and the benchmarks: Debian's server binaries, a cluster
of its own in a temporary directory, on a free loopback port, stopped at the end.

initdb refuses to run as root, so as root the cluster belongs to Debian's `postgres` user
(created by the postgresql package). `.ci/run` installs the package; elsewhere a machine
without it skips the tests that need it, with the reason (`unavailable()`, through
tests/components.py).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from app.search.embedded import free_port

SERVER_ROOT = Path("/usr/lib/postgresql")
USER = "postgres"


def binaries() -> Path | None:
    """The newest installed server's bin/ (Debian puts each major version apart)."""
    found = sorted(
        (path for path in SERVER_ROOT.glob("*/bin") if (path / "initdb").exists()),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    return found[-1] if found else None


def unavailable() -> str | None:
    """Why no cluster can be started here, or None when one can."""
    if binaries() is None:
        return f"no PostgreSQL server under {SERVER_ROOT} (Debian's postgresql package)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(USER)
        except KeyError:
            return f"running as root, and there is no {USER} user to own the cluster"
    return None


@dataclass
class Postgres:
    """One running cluster; `url(name)` for a database in it, `create(name)` to make one."""

    root: Path
    port: int = field(default_factory=free_port)
    user: str = USER
    fsync: bool = False
    """Off for the tests (nothing there survives a power cut anyway); on for a benchmark
    whose commits should wait for the disk as a real server's do."""

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def command(self, program: str, *args: str) -> list[str]:
        bin_dir = binaries()
        assert bin_dir is not None, unavailable()
        line = [str(bin_dir / program), *args]
        if os.geteuid() == 0:
            return ["runuser", "-u", USER, "--", *line]
        return line

    def run(self, program: str, *args: str) -> None:
        subprocess.run(
            self.command(program, *args), check=True, capture_output=True, text=True, timeout=60
        )

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            entry = pwd.getpwnam(USER)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        else:
            self.user = pwd.getpwuid(os.geteuid()).pw_name
        self.run(
            "initdb", "-D", str(self.data), "-U", self.user, "--auth=trust",
            "--encoding=UTF8", "--locale=C.UTF-8",
        )  # fmt: skip

    def start(self) -> None:
        """Start (or start again after stop/kill) on the same port and data."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=300 "
            "-c shared_buffers=64MB"
        )
        self.run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def kill(self) -> None:
        """The server gone at once, as when its machine loses power or the network."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        subprocess.run(["pkill", "-KILL", "-P", str(pid)], check=False)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        (self.data / "postmaster.pid").unlink(missing_ok=True)

    def create(self, database: str) -> str:
        """A new empty database; its URL."""
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, database)
        return self.url(database)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def start_postgres() -> Postgres:
    """A new cluster, started; the caller stops and removes it."""
    reason = unavailable()
    assert reason is None, reason
    # Not under pytest's tmp_path: as root that is 0700, closed to the postgres user.
    server = Postgres(Path(tempfile.mkdtemp(prefix="pg-cluster-")))
    server.init()
    server.start()
    return server


@contextmanager
def own_cluster() -> Iterator[Postgres]:
    """A cluster of the caller's own, to stop or kill at will, removed after; for a fixture
    that depends on conftest's `postgresql`, which skips (or fails, in CI) where none can
    start."""
    server = start_postgres()
    try:
        yield server
    finally:
        with suppress(subprocess.CalledProcessError):  # a test may have stopped it
            server.stop()
        server.remove()
