"""Bad input on the command line: a clear message, a non-zero exit, nothing run; and what
a command imports at start."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli, run_main


def test_invalid_locale_is_refused_with_the_accepted_forms():
    run = run_main("search", "x", "--locale", "polish!", searxng_url="http://127.0.0.1:9")
    assert run.returncode == 1
    assert "invalid search locale 'polish!'" in run.stderr
    assert "pl-PL" in run.stderr


def test_invalid_search_locale_setting_is_named():
    run = run_main("search", "x", searxng_url="http://127.0.0.1:9", SEARCH_LOCALE="pl_PL!")
    assert run.returncode == 1
    assert "invalid search locale" in run.stderr


def test_page_outside_brave_range_is_refused():
    run = run_main("search", "x", "--page", "11", searxng_url="http://127.0.0.1:9")
    assert run.returncode == 2
    assert "--page" in run.stderr


def test_serve_refuses_a_non_loopback_address_without_a_token():
    run = run_main("serve", "--host", "0.0.0.0", searxng_url="", AUTH_TOKEN="")
    assert run.returncode == 1
    assert "AUTH_TOKEN" in run.stderr


def test_searxng_settings_renders_the_locale(tmp_path):
    run = run_main("searxng-settings", str(tmp_path), searxng_url="", SEARCH_LOCALE="fr-fr")
    assert run.returncode == 0, run.stderr
    assert "default_lang: fr-FR" in (tmp_path / "settings.yml").read_text()
    assert (tmp_path / "limiter.toml").exists()


def test_empty_query_is_refused_before_any_search():
    run = run_main("search", "  ", searxng_url="http://127.0.0.1:9")
    assert run.returncode == 2
    assert "query is empty" in run.stderr


# What only some commands use: the web stack (serve), the extractor and the language model
# (fetch, extract, measure-locale), the MCP SDK (mcp). A command that needs none of them
# starts without them: most of a quick command's time was these imports.
HEAVY = ("uvicorn", "fastapi", "trafilatura", "lxml", "numpy", "py3langid", "mcp")
# aiohttp carries requests to the model server and SearXNG: a command that sends none
# starts without it too.
SENDING = ("aiohttp",)


def imported_by(*args: str, **env: str) -> set[str]:
    """The top-level packages `python -X importtime -m app ...` imports, as it lists them."""
    run = run_cli(*args, PYTHONPROFILEIMPORTTIME="1", **env)
    lines = [line for line in run.stderr.splitlines() if line.startswith("import time:")]
    return {line.rpartition("|")[2].strip().split(".")[0] for line in lines}


@pytest.mark.parametrize(
    ("args", "unused"),
    [
        pytest.param(("--help",), HEAVY + SENDING, id="--help"),
        pytest.param(("search", "x"), HEAVY, id="search x"),
        pytest.param(("export", "--all"), HEAVY + SENDING, id="export --all"),
        pytest.param(("doctor",), HEAVY, id="doctor"),
        pytest.param(("searxng-settings", "{tmp}"), HEAVY + SENDING, id="searxng-settings"),
        pytest.param(("users", "list"), HEAVY + SENDING, id="users list"),
    ],
)
def test_a_quick_command_starts_without_what_only_others_use(args, unused, tmp_path):
    given = [arg.format(tmp=tmp_path) for arg in args]
    imported = imported_by(
        *given,
        searxng_url="http://127.0.0.1:9",
        LLM_BASE_URL="http://127.0.0.1:9/v1",
        DATA_DIR=str(tmp_path),
    )
    assert "app" in imported  # the listing is read
    assert imported.isdisjoint(unused), sorted(imported.intersection(unused))


def test_extract_imports_the_extractor_it_runs(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<html><body><p>Hello.</p></body></html>")
    imported = imported_by("extract", str(page), searxng_url="")
    assert {"trafilatura", "lxml"} <= imported
