"""A service killed however it dies (SIGKILL: the OOM killer, `kill -9`, a supervisor that
crashed) leaves no process of its own behind: every one it started ends with it, or they
would pile up, one set for each kill, holding memory until the machine restarts."""

from __future__ import annotations

import signal
import time

import httpx

from tests.chat_client import numbered
from tests.conftest import chat_env
from tests.fakes.llm_server import Reply, ToolCall
from tests.fakes.pages import ARTICLE_TITLE
from tests.processes import descendants
from tests.serving import serve

GONE_WITHIN = 10.0
"""Seconds the processes a killed service started may take to notice and end."""


def test_a_service_killed_after_reading_a_page_leaves_no_process_behind(
    llm, pages, searxng, tmp_path
):
    article = f"{pages.url}/article"
    llm.script(Reply(tool_calls=[ToolCall("web_fetch", {"url": article})]), Reply(text="Read."))
    env = chat_env(llm, tmp_path, pages, SEARXNG_URL=searxng.url)
    with serve(env, ending=signal.SIGKILL) as served:
        with httpx.Client(base_url=served.url, timeout=60) as client:
            conversation_id = client.post("/api/conversations", json={}).json()["id"]
            path = f"/api/conversations/{conversation_id}/chat"
            with client.stream("POST", path, json={"message": f"Read {article}"}) as answer:
                assert numbered(answer)[-1][1]["type"] == "done"
        assert ARTICLE_TITLE in llm.requests[-1].body["messages"][-1]["content"]  # extracted
        started = descendants(served.process.pid)
        assert started, "the page was extracted in no process of the service's"
        served.stop(signal.SIGKILL)
    deadline = time.monotonic() + GONE_WITHIN
    while (left := [each for each in started if each.alive()]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], f"still running {GONE_WITHIN:g} s after the service was killed"
