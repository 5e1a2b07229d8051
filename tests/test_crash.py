"""What the user saw survives a crash: the service is killed (SIGKILL) while several
answers stream and settings, memory and models are being written; after each restart the
database is intact, every message is there once, the answers hold what was streamed up to
the last checkpoint (marked interrupted), and no lease blocks the next turn. bench/crash.py
runs the same cycles 200 times."""

from __future__ import annotations

import pytest

from tests import crashing
from tests.conftest import chat_env
from tests.fakes.llm_server import Reply

CYCLES = 3


@pytest.mark.long  # three services killed and restarted
def test_nothing_is_lost_or_doubled_across_sigkills(llm, searxng, tmp_path):
    llm.clear()
    llm.default = Reply(text=crashing.STORY, chunk_delay=0.01)
    env = {**chat_env(llm, tmp_path), "SEARXNG_URL": searxng.url}
    try:
        report = crashing.run(env, CYCLES)
    finally:
        llm.default = Reply(text="OK")
    assert report.problems == []
    assert report.cycles == CYCLES
    # Checkpoints come every half second: little of what was seen is lost.
    assert report.kept >= report.received * 0.3, (report.kept, report.received)
