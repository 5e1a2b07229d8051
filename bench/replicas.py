"""What the benchmarks of several replicas share (issue 26): one shared database (a real
PostgreSQL from tests/postgres.py, or SQLite in one DATA_DIR that every replica opens),
N replicas of `python -m app serve` with the same settings, each on its own port and
optionally under a host name of its own (as on separate machines: a lease then cannot be
recognised as its dead owner's, it has to expire), and Debian's nginx in front with a
config of its own in a temporary directory (no buffering, for the streams). The database's
side is watched while a benchmark runs: its processes' CPU time, and samples of
pg_stat_activity (what its connections wait on) and of pg_locks (locks not granted).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.search.embedded import free_port  # noqa: E402
from bench.common import (  # noqa: E402
    Service,
    children,
    process_cpu_times,
    service,
    wait_healthy,
)
from tests import postgres  # noqa: E402

BACKENDS = ("postgresql", "sqlite")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def backend_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="postgresql",
        help="the shared database: a PostgreSQL of its own (tests/postgres.py, Debian's "
        "server), or SQLite in one DATA_DIR shared by the replicas",
    )


# --------------------------------------------------------------------------------------------
# The database


@dataclass
class Shared:
    """The database server every replica uses (none for SQLite, where the replicas share
    one DATA_DIR); `new_database` gives the settings selecting a new empty database."""

    backend: str
    server: postgres.Postgres | None = None
    url: str | None = None
    """The PostgreSQL database made last."""

    def new_database(self, name: str) -> dict[str, str]:
        """The settings to add to a replica's for a new empty database `name` (for SQLite,
        nothing: a new DATA_DIR is the new database)."""
        if self.server is None:
            return {}
        self.url = self.server.create(name.replace("-", "_"))
        return {"DATABASE_URL": self.url}

    def cpu_seconds(self) -> float:
        """The PostgreSQL server's CPU time (postmaster and every backend now alive); 0 for
        SQLite, whose work is in the replicas' own processes."""
        if self.server is None:
            return 0.0
        pid = int((self.server.data / "postmaster.pid").read_text().split()[0])
        return sum(process_cpu_times(pid))

    def stored_conversations(self) -> int | None:
        """How many conversations the last PostgreSQL database holds (None for SQLite): a
        run that left none there ran on something else (a service ignoring DATABASE_URL)."""
        if self.url is None:
            return None
        import psycopg

        with psycopg.connect(self.url) as db:
            exists = db.execute("SELECT to_regclass('conversations') IS NOT NULL").fetchone()
            if not exists or not exists[0]:
                return 0
            row = db.execute("SELECT count(*) FROM conversations").fetchone()
        return int(row[0]) if row else 0

    def check_used(self) -> None:
        if self.stored_conversations() == 0:
            raise SystemExit(
                "the replicas wrote nothing to PostgreSQL: this service does not read "
                "DATABASE_URL yet (run with --backend sqlite)"
            )


@contextmanager
def database_server(backend: str) -> Iterator[Shared]:
    """For PostgreSQL, a cluster of tests/postgres.py with fsync turned back on (the tests
    run it off): a commit waits for the disk, as on a real server and as SQLite's outcome
    write does."""
    if backend == "sqlite":
        yield Shared(backend)
        return
    reason = postgres.unavailable()
    if reason:
        raise SystemExit(f"--backend postgresql: {reason}")
    server = postgres.start_postgres()
    try:
        server.stop()
        server.fsync = True
        server.start()
        yield Shared(backend, server)
    finally:
        try:
            server.stop()
        finally:
            server.remove()


@dataclass
class Activity:
    """Samples of the database's sessions while a benchmark runs."""

    samples: int = 0
    states: Counter[str] = field(default_factory=Counter)
    """state and wait event of each non-idle session, summed over the samples."""
    most_connections: int = 0
    ungranted_locks: int = 0
    """Locks waited for, summed over the samples."""

    def waits(self, top: int = 6) -> str:
        if not self.samples:
            return "-"
        return ", ".join(
            f"{name} {count / self.samples:.2f}" for name, count in self.states.most_common(top)
        )


ACTIVITY = (
    "SELECT state, coalesce(wait_event_type || ':' || wait_event, 'on CPU') FROM "
    "pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
)
UNGRANTED = "SELECT count(*) FROM pg_locks WHERE NOT granted"


@contextmanager
def watching_database(shared: Shared, every: float = 0.1) -> Iterator[Activity]:
    """pg_stat_activity and pg_locks sampled every `every` seconds, from a thread with a
    connection of its own (nothing for SQLite)."""
    activity = Activity()
    if shared.url is None:
        yield activity
        return
    import psycopg

    stop = threading.Event()

    def sample() -> None:
        with psycopg.connect(shared.url, autocommit=True) as db:
            while not stop.wait(every):
                rows = db.execute(ACTIVITY).fetchall()
                activity.samples += 1
                activity.most_connections = max(activity.most_connections, len(rows))
                for state, wait in rows:
                    if state != "idle":
                        activity.states[f"{state} ({wait})"] += 1
                locks = db.execute(UNGRANTED).fetchone()
                activity.ungranted_locks += int(locks[0]) if locks else 0

    thread = threading.Thread(target=sample, name="pg_stat_activity", daemon=True)
    thread.start()
    try:
        yield activity
    finally:
        stop.set()
        thread.join(timeout=10)


def core_waits(pid: int) -> float:
    """Seconds the threads of process `pid` and of its children alive now spent runnable
    but waiting for a core (the second field of each task's schedstat): what a process
    lost to everything else on the machine."""
    total = 0
    for member in (pid, *children_of(pid)):
        for task in Path(f"/proc/{member}/task").glob("*/schedstat"):
            with suppress(FileNotFoundError, ProcessLookupError, IndexError):
                total += int(task.read_text().split()[1])
    return total / 1e9


def children_of(pid: int) -> list[int]:
    try:
        return children(pid)
    except FileNotFoundError:
        return []


# --------------------------------------------------------------------------------------------
# The replicas


def apart(name: str) -> list[str]:
    """A wrapper running the service under host name `name` (a UTS namespace of its own,
    as root): its leases' owners name that host, as on a machine of its own."""
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', name, sys.executable]


def can_run_apart() -> bool:
    probe = subprocess.run([*apart("probe")[:-1], "true"], capture_output=True, check=False)
    return probe.returncode == 0


@dataclass
class Replica:
    """One replica: its name, fixed port (kept across restarts, as the proxy knows it) and
    environment; `running` is its process while it serves."""

    name: str
    env: dict[str, str]
    root: Path
    separate_host: bool = False
    port: int = field(default_factory=free_port)
    running: Service | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @contextmanager
    def serving(self) -> Iterator[Service]:
        wrapper = apart(self.name) if self.separate_host else None
        with service(self.env, self.root, wrapper=wrapper, port=self.port) as svc:
            self.running = svc
            try:
                yield svc
            finally:
                self.running = None

    def cpu_seconds(self) -> float:
        return self.running.cpu_seconds() if self.running else 0.0


@contextmanager
def replicas(
    count: int, env: dict[str, str], root: Path, *, separate_hosts: bool = False
) -> Iterator[list[Replica]]:
    """`count` replicas with the same settings, all serving."""
    started = [Replica(f"replica-{n + 1}", env, root, separate_hosts) for n in range(count)]
    with ExitStack() as stack:
        for replica in started:
            stack.enter_context(replica.serving())
        yield started


# --------------------------------------------------------------------------------------------
# The proxy

NGINX_CONF = """\
{user}worker_processes {workers};
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    upstream chat {{
        {balance};
{servers}
        keepalive 256;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 16m;
        location / {{
            proxy_pass http://chat;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 600s;
        }}
    }}
}}
"""


@dataclass
class Proxy:
    url: str
    process: subprocess.Popen

    def cpu_seconds(self) -> float:
        """The master's and its workers' CPU time."""
        return sum(process_cpu_times(self.process.pid))


@contextmanager
def proxy(ports: list[int], *, balance: str = "least_conn", workers: int = 1) -> Iterator[Proxy]:
    """Debian's nginx in front of `ports`, in the foreground, with its own config and files
    in a temporary directory; `balance` is "least_conn" or "round_robin"."""
    root = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
    port = free_port()
    config = NGINX_CONF.format(
        user="user root;\n" if os.geteuid() == 0 else "",
        workers=workers,
        root=root,
        balance="least_conn" if balance == "least_conn" else "# round robin",
        servers="\n".join(f"        server 127.0.0.1:{p};" for p in ports),
        port=port,
    )
    (root / "nginx.conf").write_text(config)
    command = [
        NGINX,
        "-p",
        str(root),
        "-e",
        str(root / "error.log"),
        "-c",
        str(root / "nginx.conf"),
    ]
    process = subprocess.Popen([*command, "-g", "daemon off;"], stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(url, process, 20):
            errors = process.stderr.read().decode() if process.poll() is not None else ""
            raise RuntimeError(f"nginx did not start: {errors}")
        yield Proxy(url, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)
