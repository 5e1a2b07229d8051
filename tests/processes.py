"""Processes: a script run in a fresh interpreter for what it saw, and processes as Linux's
/proc shows them (what a process started, and whether it still runs)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def seen_by(command: list[str], env: dict[str, str], cwd: Path | None = None) -> Any:
    """Run `command` (a script that prints what it saw as JSON on its last line) to its end
    and return that JSON; a failed run fails with its error output."""
    ran = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout.strip().splitlines()[-1])


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


def parent_of(pid: int) -> int | None:
    stat = stat_of(pid)
    return stat[1] if stat else None


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


def has_mapped(pid: int, path_part: str) -> bool:
    """Whether the process has mapped a file whose path holds `path_part`: a library it
    imported (a C extension is a shared object, ``lxml/etree.cpython-...so``)."""
    return path_part in Path(f"/proc/{pid}/maps").read_text()
