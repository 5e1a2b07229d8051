"""A service killed however it dies (SIGKILL: the OOM killer, `kill -9`, a supervisor that
crashed) leaves no process of its own behind: every one it started ends with it, or they
would pile up, one set for each kill, holding memory until the machine restarts."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.chat_client import numbered
from tests.conftest import chat_env
from tests.fakes.llm_server import Reply, ToolCall
from tests.fakes.pages import ARTICLE_TITLE
from tests.serving import serve

GONE_WITHIN = 10.0
"""Seconds the processes a killed service started may take to notice and end."""


@dataclass(frozen=True)
class Running:
    """A process as /proc shows it: its start time tells it from a later one given its pid."""

    pid: int
    started: str
    command: str

    def alive(self) -> bool:
        """Still running: not ended, and not a zombie (ended, its status not yet collected)."""
        now = stat_of(self.pid)
        return now is not None and now[0] != "Z" and now[2] == self.started


def stat_of(pid: int) -> tuple[str, int, str] | None:
    """The process's state, parent's pid and start time, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command in parentheses may hold spaces and parentheses: the fields follow its last.
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), fields[19]


def descendants(root: int) -> list[Running]:
    """The processes started by `root`, by its children, and so on."""
    parents: dict[int, int] = {}
    started: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := stat_of(int(entry.name))) is not None:
            parents[int(entry.name)], started[int(entry.name)] = stat[1], stat[2]
    found, wanted = [], {root}
    while wanted:
        children = {pid for pid, parent in parents.items() if parent in wanted}
        for pid in children:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except (FileNotFoundError, ProcessLookupError):
                continue
            found.append(Running(pid, started[pid], command.decode(errors="replace")[:200]))
        wanted = children
    return found


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
