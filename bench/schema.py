"""Schemathesis's long run against the chat service: every operation, all checks, every
phase, many examples. On loopback: the fake model server, a real SearXNG with the fake Brave
API, the page server. The test suite runs the same with few examples (tests/test_schema.py).

Run: .venv/bin/python bench/schema.py [EXAMPLES_PER_OPERATION]   (default 200)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import ChatService, chat_env, fake_stack  # noqa: E402
from tests.test_schema import run_schemathesis  # noqa: E402


def main() -> int:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with fake_stack() as outside:
        env = chat_env(outside.llm, outside.scratch, outside.pages)
        service = ChatService(env, outside.searxng.url).start()
        try:
            result = run_schemathesis(service.url, examples, outside.scratch)
        finally:
            service.stop()
    print(result.stdout[-3000:])
    counts = re.search(r"(\d+) generated, (\d+) (passed|found)", result.stdout)
    server_errors = len(re.findall(r"ST101 Server error", result.stdout))
    print(
        f"schemathesis: {counts.group(1) if counts else '?'} examples, {server_errors} with a 5xx"
    )
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
