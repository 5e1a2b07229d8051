"""A small research on a real llama-server (Gemma 3 270M, tests/llama_server.py): the
model's answers mean nothing; what is tested is that llama.cpp takes the structured steps'
`response_format` and that what its constrained decoding writes is read at every step."""

from __future__ import annotations

import json
import logging

import pytest

from tests.conftest import run_main
from tests.llama_server import llama
from tests.llama_turns import service_env
from tests.research_model import QUESTION
from tests.resolving import resolve_everything_privately

__all__ = ["llama"]  # the fixture, imported to be used here


def test_a_small_research_runs_through_on_llama_server(
    llama, pages, brave, searxng, tmp_path, monkeypatch, caplog: pytest.LogCaptureFixture
):
    resolve_everything_privately(monkeypatch)
    article = f"{pages.url}/article"
    monkeypatch.setattr(brave, "first_result", {"url": article, "title": "Pierogi"})
    env = service_env(llama, tmp_path, FETCH_ALLOW_HOSTS=pages.host, SEARCH_RATE="50")
    with caplog.at_level(logging.INFO, logger="app.research"):
        run = run_main(
            "research",
            QUESTION,
            "--json",
            "--max-searches",
            "2",
            "--max-pages",
            "2",
            searxng_url=searxng.url,
            **env,
        )
    assert run.returncode in (0, 3), run.stderr  # a report, or nothing found: no failure
    result = json.loads(run.stdout)
    assert result["plan"] and result["spent"]["searches"] >= 1
    assert result["spent"]["prompt_tokens"] > 0 and result["spent"]["completion_tokens"] > 0
    assert "refused response_format" not in caplog.text  # constrained, not plain text
    assert "could not be read" not in caplog.text
