"""The command line as a user runs it: `python -m app fetch | extract | doctor | serve`, and
what a bad setting in the environment looks like."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from app.search.embedded import free_port
from app.store.database import Database
from tests.conftest import API_KEY, NO_SEARXNG, ROOT, run_cli, run_main
from tests.fakes.conventions import ollama_routes
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall, tools_unsupported
from tests.fakes.pages import ARTICLE_TITLE
from tests.processes import parent_of
from tests.serving import serve, start

WAITRESS = "waitress.*searx.webapp"

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Notes on sourdough</title>
</head><body><nav><a href="/">Home</a> <a href="/shop">Shop</a></nav>
<article><h1>Notes on sourdough</h1>
<p>A sourdough starter is flour and water left to ferment, so that wild yeast and lactic
bacteria do the work that baker's yeast does in a quick loaf. Feed it twice a day.</p>
<p>Bake the loaf in a covered pot at 250 degrees for twenty minutes, then uncover it for
another twenty so that the crust can brown.</p>
</article><footer>All rights reserved, Sourdough Corner.</footer></body></html>
"""


# -- fetch -----------------------------------------------------------------------------------


def test_fetch_prints_the_page_as_the_model_gets_it(pages):
    url = f"{pages.url}/article"
    run = run_main("fetch", url, searxng_url=NO_SEARXNG, FETCH_ALLOW_HOSTS=pages.host)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    # Inside the block that tells the model never to obey it.
    assert lines[0].startswith('<untrusted-data source="web_fetch"')
    assert lines[1] == f"Title: {ARTICLE_TITLE}"
    assert lines[2] == f"URL: {url}"
    text = run.stdout
    assert "Pierogi are filled dumplings" in text
    assert "- 500 g plain flour" in text
    assert "| Potato and cheese | 4 |" in text
    assert "Copyright Loopback Kitchen" not in text  # the footer is not the page's text
    assert "About us" not in text  # nor is the menu


def test_fetch_json_has_the_page_fields(pages):
    url = f"{pages.url}/article"
    run = run_main("fetch", url, "--json", searxng_url=NO_SEARXNG, FETCH_ALLOW_HOSTS=pages.host)
    assert run.returncode == 0, run.stderr
    page = json.loads(run.stdout)
    assert page["url"] == url
    assert page["status"] == 200
    assert page["content_type"] == "text/html"
    assert page["title"] == ARTICLE_TITLE
    assert "Pierogi are filled dumplings" in page["text"]
    assert page["chars"] == len(page["text"])
    assert f"\nTitle: {ARTICLE_TITLE}\nURL: {url}\n\n" in page["for_model"]


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("http://127.0.0.1/admin", "loopback"),
        ("http://localhost/", "this machine"),
        ("http://2130706433/", "loopback"),  # 127.0.0.1 spelt as a decimal number
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://10.1.2.3/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("file:///etc/passwd", "http"),
    ],
)
def test_fetch_refuses_private_addresses_and_says_why(address, reason):
    run = run_main("fetch", address, searxng_url=NO_SEARXNG, FETCH_ALLOW_HOSTS="")
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert run.stdout == ""
    assert run.stderr.startswith("refused: ")
    assert reason in run.stderr
    assert "Traceback" not in run.stderr


def test_fetch_of_the_loopback_page_server_needs_the_allow_list(pages):
    asked = len(pages.requests)
    run = run_main("fetch", f"{pages.url}/article", searxng_url=NO_SEARXNG, FETCH_ALLOW_HOSTS="")
    assert run.returncode == 2
    assert run.stderr.startswith("refused: ") and "not allowed" in run.stderr
    assert len(pages.requests) == asked  # refused before any connection


def test_fetch_of_a_missing_page_exits_1(pages):
    url = f"{pages.url}/status?code=404"
    run = run_main("fetch", url, searxng_url=NO_SEARXNG, FETCH_ALLOW_HOSTS=pages.host)
    assert run.returncode == 1
    assert run.stdout == ""
    assert "error:" in run.stderr and "404" in run.stderr


def test_fetch_of_an_unreachable_server_exits_1():
    port = free_port()  # nothing listens there
    run = run_main(
        "fetch",
        f"http://127.0.0.1:{port}/page",
        searxng_url=NO_SEARXNG,
        FETCH_ALLOW_HOSTS=f"127.0.0.1:{port}",
    )
    assert run.returncode == 1
    assert "error:" in run.stderr and "connect" in run.stderr
    assert "Traceback" not in run.stderr


def test_fetch_of_an_image_exits_1_saying_it_is_not_a_page(pages):
    url = f"{pages.url}/image.png"
    run = run_main("fetch", url, searxng_url=NO_SEARXNG, FETCH_ALLOW_HOSTS=pages.host)
    assert run.returncode == 1
    assert "image/png" in run.stderr and "not a web page" in run.stderr


# -- extract ---------------------------------------------------------------------------------


def saved_pages(tmp_path: Path) -> tuple[Path, Path]:
    html = tmp_path / "sourdough.html"
    html.write_text(PAGE, encoding="utf-8")
    packed = tmp_path / "sourdough-copy.html.gz"
    packed.write_bytes(gzip.compress(PAGE.encode("utf-8")))
    return html, packed


def test_extract_prints_the_main_text_of_html_and_gzipped_html(tmp_path):
    html, packed = saved_pages(tmp_path)
    run = run_main("extract", str(html), str(packed), searxng_url=NO_SEARXNG)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert f"== {html}: Notes on sourdough (" in out
    assert f"== {packed}: Notes on sourdough (" in out
    assert out.count("A sourdough starter is flour and water left to ferment") == 2
    assert out.count("uncover it for another twenty") == 2
    assert "All rights reserved" not in out
    assert "Shop" not in out


def test_extract_json_maps_each_file_as_given(tmp_path):
    html, packed = saved_pages(tmp_path)
    relative = os.path.relpath(html, ROOT)  # run_cli runs in the checkout
    run = run_main("extract", "--json", relative, str(packed), searxng_url=NO_SEARXNG)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert list(result) == [relative, str(packed)]
    for entry in result.values():
        assert set(entry) == {"title", "text", "chars", "charset"}
        assert entry["charset"]["name"] in ("utf-8", "ascii")
        assert entry["title"] == "Notes on sourdough"
        assert entry["text"].startswith("A sourdough starter is flour and water")
        assert entry["chars"] == len(entry["text"])
    assert result[relative] == result[str(packed)]


def test_extract_of_a_missing_file_says_which(tmp_path):
    missing = tmp_path / "nowhere.html"
    run = run_main("extract", str(missing), searxng_url=NO_SEARXNG)
    assert run.returncode == 1
    assert run.stdout == ""
    assert str(missing) in run.stderr and "No such file" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("damage", ["not gzip", "truncated"])
def test_extract_of_a_damaged_gzip_file_is_a_clear_error(tmp_path, damage):
    broken = tmp_path / "saved.html.gz"
    packed = gzip.compress(PAGE.encode("utf-8"))
    broken.write_bytes(b"<html>plain</html>" if damage == "not gzip" else packed[:150])
    run = run_main("extract", str(broken), searxng_url=NO_SEARXNG)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert run.stderr.startswith(f"error: {broken}: ")


# -- doctor ----------------------------------------------------------------------------------


def doctor_lines(stdout: str) -> dict[str, str]:
    """check name -> 'ok' or 'FAIL', from lines like 'ok    SearXNG reachable: detail'."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith(("ok  ", "FAIL")):
            status, _, rest = line.partition("  ")
            found[rest.strip().split(":", 1)[0]] = status.strip()
    return found


EVERY_CHECK = [
    "SearXNG reachable",
    "SearXNG JSON API on",
    "engine braveweb loaded",
    "Brave API key accepted",
    "Brave plan",
    "model server reachable",
    "tool calling accepted by fake-model",
    "served context window",
]


def test_doctor_all_ok(searxng, brave):
    with FakeLLM(models=["fake-model"], n_ctx=8192) as llm:
        run = run_main(
            "doctor",
            searxng_url=searxng.url,
            LLM_BASE_URL=llm.api_base,
            DEFAULT_MODEL="fake-model",
            MODELS="",
        )
        tool_requests = [r.body for r in llm.requests if r.body.get("tools")]
    assert run.returncode == 0, run.stdout + run.stderr
    assert doctor_lines(run.stdout) == {name: "ok" for name in EVERY_CHECK}
    assert "FAIL" not in run.stdout and "fix:" not in run.stdout
    window = next(line for line in run.stdout.splitlines() if "served context window" in line)
    assert "8192" in window
    assert tool_requests and tool_requests[0]["model"] == "fake-model"
    assert brave.requests  # the key was really tried against the API


def test_doctor_names_a_rejected_brave_key(fresh_searxng, brave, llm):
    llm.clear()
    brave.fail_next(422, "SUBSCRIPTION_TOKEN_INVALID")
    run = run_main(
        "doctor",
        searxng_url=fresh_searxng.url,
        LLM_BASE_URL=llm.api_base,
        DEFAULT_MODEL="fake-model",
    )
    asked = [r.params.get("q") for r in brave.requests]  # which query was refused: the first
    assert run.returncode == 1, (run.stdout, asked)
    checks = doctor_lines(run.stdout)
    assert checks["Brave API key accepted"] == "FAIL", run.stdout
    assert checks["SearXNG reachable"] == "ok" and checks["model server reachable"] == "ok"
    fail_line = next(line for line in run.stdout.splitlines() if "Brave API key" in line)
    assert "SUBSCRIPTION_TOKEN_INVALID" in fail_line
    assert "fix: set BRAVE_API_KEY" in run.stdout


def test_doctor_does_not_blame_the_key_for_an_engine_error(fresh_searxng, brave, llm):
    """A Brave API that fails (here a 500) is not a key problem: the fix names the URL, the
    network and SearXNG's /stats/errors instead of asking for another key."""
    llm.clear()
    brave.fail_next(500, "INTERNAL_ERROR", times=3)
    run = run_main(
        "doctor",
        searxng_url=fresh_searxng.url,
        LLM_BASE_URL=llm.api_base,
        DEFAULT_MODEL="fake-model",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert doctor_lines(run.stdout)["Brave API key accepted"] == "FAIL", run.stdout
    assert "set BRAVE_API_KEY" not in run.stdout
    assert "BRAVE_API_URL" in run.stdout and f"{fresh_searxng.url}/stats/errors" in run.stdout


def test_doctor_with_a_wrong_brave_key_in_its_own_searxng(brave, llm):
    """No SEARXNG_URL: doctor starts the embedded SearXNG with the user's (wrong) key."""
    llm.clear()
    run = run_cli(
        "doctor",
        searxng_url="",
        BRAVE_API_URL=brave.url,
        BRAVE_API_KEY="not-the-key",
        LLM_BASE_URL=llm.api_base,
        DEFAULT_MODEL="fake-model",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    checks = doctor_lines(run.stdout)
    assert checks["Brave API key accepted"] == "FAIL"
    assert checks["engine braveweb loaded"] == "ok"
    fail_line = next(line for line in run.stdout.splitlines() if "Brave API key" in line)
    assert "SUBSCRIPTION_TOKEN_INVALID" in fail_line  # Brave's own code, as the API sent it
    assert "fix: set BRAVE_API_KEY" in run.stdout


def test_doctor_with_no_model_server_says_to_fix_llm_base_url(searxng, brave):
    closed = free_port()
    run = run_main(
        "doctor",
        searxng_url=searxng.url,
        LLM_BASE_URL=f"http://127.0.0.1:{closed}/v1",
        DEFAULT_MODEL="fake-model",
    )
    assert run.returncode == 1
    assert doctor_lines(run.stdout)["model server reachable"] == "FAIL"
    fix = next(line for line in run.stdout.splitlines() if line.strip().startswith("fix:"))
    assert "LLM_BASE_URL" in fix
    assert "Traceback" not in run.stderr


def test_doctor_says_the_chat_still_withholds_tools_a_model_accepts_now(
    searxng, brave, llm, tmp_path
):
    database = Database(tmp_path / "chat.db")  # as the chat left it after a refusal
    database.refuse_tools("fake-model", "fake-model does not support tools")
    database.close()
    llm.clear()
    run = run_main(
        "doctor",
        searxng_url=searxng.url,
        LLM_BASE_URL=llm.api_base,
        DEFAULT_MODEL="fake-model",
        DATA_DIR=str(tmp_path),
    )
    assert doctor_lines(run.stdout)["tool calling accepted by fake-model"] == "ok"
    line = next(x for x in run.stdout.splitlines() if "web tools offered to fake-model" in x)
    assert line.startswith("warn") and "does not support tools" in line
    assert "Try tools again" in run.stdout


def test_doctor_reports_a_model_without_tool_calling(searxng, brave, llm):
    llm.clear()
    llm.script(tools_unsupported())
    run = run_main(
        "doctor", searxng_url=searxng.url, LLM_BASE_URL=llm.api_base, DEFAULT_MODEL="fake-model"
    )
    assert run.returncode == 1
    checks = doctor_lines(run.stdout)
    assert checks["tool calling accepted by fake-model"] == "FAIL"
    assert checks["model server reachable"] == "ok"
    assert "does not support tools" in run.stdout
    assert "fix: pick a model with tool calling" in run.stdout


def doctor_line(stdout: str, name: str) -> tuple[str, str]:
    """The check's line and the fix line under it (empty when none)."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if f"  {name}:" in line)
    after = lines[at + 1].strip() if at + 1 < len(lines) else ""
    return lines[at], after if after.startswith("fix:") else ""


def doctor_against_ollama(searxng, **shape: int) -> subprocess.CompletedProcess[str]:
    """`doctor` with qwen3:8b on a fake Ollama shaped as `ollama_routes` takes it."""
    with FakeLLM(models=["qwen3:8b"], routes=ollama_routes("qwen3:8b", **shape)) as ollama:
        return run_main(
            "doctor",
            searxng_url=searxng.url,
            LLM_BASE_URL=ollama.api_base,
            DEFAULT_MODEL="qwen3:8b",
            MODELS="",
        )


def test_doctor_warns_of_ollamas_small_default_window_and_says_how_to_raise_it(searxng):
    run = doctor_against_ollama(searxng)  # no num_ctx, not loaded: Ollama's default applies
    assert run.returncode == 0, run.stdout + run.stderr  # a warning, not a failure
    line, fix = doctor_line(run.stdout, "served context window")
    assert line.startswith("warn")
    assert "4096 tokens" in line and "40960" in line  # served, and what it was trained for
    assert "OLLAMA_CONTEXT_LENGTH" in fix and "PARAMETER num_ctx" in fix
    assert "MODEL_PARAMS cannot set it" in fix


def test_doctor_reads_the_window_ollama_loaded_the_model_with(searxng):
    run = doctor_against_ollama(searxng, loaded=32768)  # OLLAMA_CONTEXT_LENGTH=32768
    line, fix = doctor_line(run.stdout, "served context window")
    assert line.startswith("ok") and "32768" in line and not fix, run.stdout


# -- serve -----------------------------------------------------------------------------------


def waitress_pids() -> set[int]:
    found = subprocess.run(["pgrep", "-f", WAITRESS], capture_output=True, text=True).stdout
    return {int(pid) for pid in found.split()}


def searxng_workdir(pid: int) -> Path:
    """Where the embedded SearXNG keeps its settings and log (from its environment)."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    settings = next(v for v in environ if v.startswith(b"SEARXNG_SETTINGS_PATH="))
    return Path(settings.split(b"=", 1)[1].decode()).parent


@pytest.mark.long  # `serve` and its own SearXNG, started and stopped
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_serve_runs_its_own_searxng_and_stops_it(brave, llm, tmp_path, stop_signal):
    llm.clear()
    env = {k: v for k, v in os.environ.items() if k != "SEARXNG_URL"}
    env.update(
        BRAVE_API_URL=brave.url,
        BRAVE_API_KEY=API_KEY,
        LLM_BASE_URL=llm.api_base,
        DEFAULT_MODEL="fake-model",
        DATA_DIR=str(tmp_path / "data"),
        SEARCH_LOCALE="pl-PL",
        AUTH_TOKEN="",
    )
    served = start(env, log=tmp_path / "serve.log")
    url, process, log = served.url, served.process, served.log
    try:
        served.wait_until_healthy(timeout=90)  # its SearXNG starts first
        config = httpx.get(f"{url}/api/config", timeout=10)
        assert config.status_code == 200
        assert config.json()["default_model"] == "fake-model"

        ours = {pid for pid in waitress_pids() if parent_of(pid) == process.pid}
        assert len(ours) == 1, "serve did not start its own SearXNG"
        workdir = searxng_workdir(next(iter(ours)))
        assert workdir.exists()

        # A turn's search goes through that SearXNG to the Brave API.
        llm.script(
            Reply(tool_calls=[ToolCall("web_search", {"query": "pierogi ruskie"})]),
            Reply(text="Found it."),
        )
        conversation = httpx.post(f"{url}/api/conversations", json={}).json()
        with httpx.stream(
            "POST",
            f"{url}/api/conversations/{conversation['id']}/chat",
            json={"message": "Find a pierogi recipe"},
            timeout=30,
        ) as response:
            events = [
                json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")
            ]
        search = next(e for e in events if e["type"] == "search")
        assert search["results"], events
        assert any(r.params.get("q") == "pierogi ruskie" for r in brave.requests)

        process.send_signal(stop_signal)
        process.wait(timeout=30)
        # At the default level, a line per turn, not one per request (LOG_LEVEL=DEBUG).
        logged = log.read_text()
        assert f"turn {conversation['id']} complete" in logged
        assert "POST /api/conversations" not in logged and "HTTP Request" not in logged
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    deadline = time.monotonic() + 10
    while ours & waitress_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ours & waitress_pids(), "the embedded SearXNG outlived serve"
    left_behind = workdir.exists()
    shutil.rmtree(workdir, ignore_errors=True)  # this test leaves nothing behind either way
    assert not left_behind, f"serve left {workdir} (SearXNG's settings and log) behind"
    assert process.returncode == 0, log.read_text()[-2000:]


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CONTEXT_BUDGET_TOKENS", "lots"),
        ("CONTEXT_BUDGET_TOKENS", "10"),
        ("MAX_TOOL_ROUNDS", "0"),
        ("WEB_SEARCH_MAX_USES", "three"),
        ("MODEL_PARAMS", "{bad"),
        ("MODEL_PARAMS", '{"fake-model": 0.2}'),
        ("FETCH_ALLOW_HOSTS", "127.0.0.1"),
        ("FETCH_ALLOW_HOSTS", "127.0.0.1:99999"),
        ("BRAVE_API_URL", "api.search.brave.com"),
        ("BRAVE_API_URL", "ftp://api.search.brave.com"),
        ("BRAVE_API_URL", "https://api.search.brave.com/res/v1/web"),
        ("BRAVE_API_URL", "https://api.search.brave.com/res/v1/web/search?q=x"),
        ("BRAVE_API_URL", "https://user:key@api.search.brave.com"),
        ("BRAVE_PRICE_PER_1000", "five dollars"),
        ("BRAVE_PRICE_PER_1000", "-5"),
        ("BRAVE_CONTEXT_TOKENS", "512"),
        ("BRAVE_CONTEXT_TOKENS_PER_URL", "10000"),
        ("RESEARCH_SEARCHES", "0"),
        ("RESEARCH_PAGES", "61"),
        ("RESEARCH_MINUTES", "ten"),
    ],
)
def test_invalid_setting_is_a_clear_error_naming_it(name, value):
    run = run_main("serve", "--port", str(free_port()), searxng_url=NO_SEARXNG, **{name: value})
    assert run.returncode == 1
    assert run.stderr.startswith("error: ")
    assert name in run.stderr
    assert "Traceback" not in run.stderr


# An OpenTelemetry set up around the service (as `opentelemetry-instrument` does, from a
# sitecustomize): every span FastAPI starts is written to a file.
TRACING = """
import os
from opentelemetry import trace

class Tracer(trace.NoOpTracer):
    def start_span(self, name, *args, **kwargs):
        with open(os.environ["SPANS_FILE"], "a") as spans:
            spans.write(f"{name} {kwargs.get('attributes')}\\n")
        return super().start_span(name, *args, **kwargs)

class Provider(trace.TracerProvider):
    def get_tracer(self, *args, **kwargs):
        return Tracer()

trace.set_tracer_provider(Provider())
"""


def test_serve_sends_no_telemetry_even_when_the_environment_sets_it_up(llm, searxng, tmp_path):
    """FastAPI traces each request (its path and query, a conversation search's words
    among them) to whatever OpenTelemetry finds configured: the service keeps that off."""
    (tmp_path / "sitecustomize.py").write_text(TRACING)
    spans = tmp_path / "spans.txt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "SPANS_FILE": str(spans),
        "FASTAPI_OTEL_AUTO_CONFIGURE": "true",
        "SEARXNG_URL": searxng.url,
        "LLM_BASE_URL": llm.api_base,
        "DEFAULT_MODEL": "fake-model",
        "DATA_DIR": str(tmp_path / "data"),
        "AUTH_TOKEN": "",
    }
    with serve(env) as served:
        found = httpx.get(f"{served.url}/api/conversations", params={"q": "my private words"})
        assert found.status_code == 200
    assert not spans.exists(), spans.read_text()
