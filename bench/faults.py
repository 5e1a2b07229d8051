"""Fault injection: every case of tests/test_faults.py once, through the real service on
loopback (the fake model server, a real SearXNG with the fake Brave API, the page server),
as a table: the kind each case ended in, the chat's HTTP status, and the 500s seen.

Run: .venv/bin/python bench/faults.py   (exits 1 when a case ended otherwise than expected)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import fake_stack  # noqa: E402
from tests.test_faults import CASES, Stack, problems  # noqa: E402

CHAT_STATUS = 1  # statuses of a turn: create, chat, read back


def main() -> int:
    rows: list[tuple[str, str, int, int, list[str]]] = []
    with fake_stack() as outside:
        for case in CASES:
            outside.llm.clear()
            outside.brave.clear()
            stack = Stack(
                outside.llm, outside.pages, outside.brave, outside.searxng.url, outside.scratch
            )
            turn = case.run(stack)
            errors = sum(status >= 500 for status in turn.statuses)
            found = problems(turn, case.expect)
            rows.append((case.name, turn.outcome(), turn.statuses[CHAT_STATUS], errors, found))
            print(f"  {case.name}: {turn.outcome()} in {turn.seconds:.1f} s", file=sys.stderr)
    width = max(len(name) for name, *_ in rows)
    print(f"{'case':{width}} | {'kind':18} | HTTP status | 500s")
    print(f"{'-' * width}-|-{'-' * 18}-|-------------|-----")
    for name, kind, status, errors, _ in rows:
        print(f"{name:{width}} | {kind:18} | {status:11} | {errors:4}")
    wrong = [(name, found) for name, *_, found in rows if found]
    total_500s = sum(errors for _, _, _, errors, _ in rows)
    print(
        f"\nfault injection: {len(rows)} cases, {len(rows) - len(wrong)} ended in their "
        f"expected kind; {total_500s} 500s"
    )
    for name, found in wrong:
        print(f"  {name}: {'; '.join(found)}")
    return 1 if wrong or total_500s else 0


if __name__ == "__main__":
    sys.exit(main())
