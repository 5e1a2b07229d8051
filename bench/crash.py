"""Crash safety: `python -m app serve` is killed (SIGKILL) at a random moment while three
answers stream and another client keeps writing settings, memory.md and the model list,
then started again, CYCLES times (tests/crashing.py says what is checked after each
restart, PRAGMA integrity_check included). Reports the problems found and how much of the
streamed text survived (characters kept / characters the clients had received).

Run: .venv/bin/python bench/crash.py [CYCLES]   (default 200)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import crashing  # noqa: E402
from tests.conftest import chat_env, fake_stack  # noqa: E402
from tests.fakes.llm_server import Reply  # noqa: E402


def main() -> int:
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with fake_stack() as outside:
        outside.llm.default = Reply(text=crashing.STORY, chunk_delay=0.01)
        env = {**chat_env(outside.llm, outside.scratch), "SEARXNG_URL": outside.searxng.url}
        report = crashing.run(env, cycles, progress=True)
    share = report.kept / report.received if report.received else 1.0
    print(f"crash cycles: {report.cycles} ({crashing.STREAMS} streams and a writer each)")
    print(f"problems: {len(report.problems)}")
    print(f"streamed text kept: {report.kept:,} of {report.received:,} characters ({share:.1%})")
    for problem in report.problems:
        print(f"  {problem}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
