"""Schemathesis's long run against the chat service: every operation, all checks, every
phase, many examples. On loopback: the fake model server, a real SearXNG with the fake Brave
API, the page server. The test suite runs the same with few examples (tests/test_schema.py).

Run: .venv/bin/python bench/schema.py [EXAMPLES_PER_OPERATION]   (default 200)
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.embedded_searxng import EmbeddedSearxng  # noqa: E402
from tests.conftest import API_KEY, SERVER_LOCALE, ChatService, chat_env, searxng_env  # noqa: E402
from tests.fakes.brave_api import FakeBrave  # noqa: E402
from tests.fakes.llm_server import FakeLLM  # noqa: E402
from tests.fakes.pages import PageServer  # noqa: E402
from tests.test_schema import run_schemathesis  # noqa: E402


def main() -> int:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with (
        FakeLLM(models=["fake-model", "fake-small"]) as llm,
        FakeBrave(api_key=API_KEY) as brave,
        PageServer() as pages,
        EmbeddedSearxng(SERVER_LOCALE, environ=searxng_env(brave)) as searxng,
        tempfile.TemporaryDirectory() as scratch,
    ):
        os.environ.pop("AUTH_TOKEN", None)
        service = ChatService(chat_env(llm, Path(scratch), pages), searxng.url).start()
        try:
            result = run_schemathesis(service.url, examples, Path(scratch))
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
