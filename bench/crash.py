"""Crash safety: `python -m app serve` is killed (SIGKILL) at a random moment while an
answer streams, then started again, CYCLES times. After each restart: the user's message
is there exactly once, no answer is duplicated, the answer holds a prefix of what the client
had received (marked interrupted), no temporary file is left, memory.md still reads, and a
new turn is accepted. Reports how much of the streamed text survived.

Run: .venv/bin/python bench/crash.py [CYCLES]   (default 30)
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import chat_env, fake_stack  # noqa: E402
from tests.fakes.llm_server import Reply  # noqa: E402
from tests.test_crash import serving  # noqa: E402

STORY = [f"Sentence {n} of the story. " for n in range(2000)]


def stream_until_killed(url: str, conversation_id: str, process, after: float) -> str:
    text = ""
    started = time.monotonic()
    path = f"{url}/api/conversations/{conversation_id}/chat"
    with httpx.stream("POST", path, json={"message": f"story {conversation_id}"}, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[len("data: ") :])
                text += event.get("text", "") if event["type"] == "delta" else ""
            if time.monotonic() - started > after:
                process.send_signal(signal.SIGKILL)
                break
    return text


def check(url: str, folder: Path, conversation_id: str, received: str) -> tuple[int, list[str]]:
    problems = []
    stored = httpx.get(f"{url}/api/conversations/{conversation_id}").json()
    users = [m for m in stored["messages"] if m["role"] == "user"]
    answers = [m for m in stored["messages"] if m["role"] == "assistant"]
    if len(users) != 1:
        problems.append(f"{len(users)} user messages")
    if len(answers) > 1:
        problems.append(f"{len(answers)} answers")
    kept = answers[0]["content"] if answers else ""
    if answers and (answers[0]["status"] != "interrupted" or not received.startswith(kept)):
        problems.append("the answer is not a marked prefix of what was received")
    if list(folder.glob(".*.tmp")):
        problems.append("a temporary file was left")
    if httpx.get(f"{url}/api/memory").status_code != 200:
        problems.append("memory.md does not read")
    return len(kept), problems


def main() -> int:
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    kept_total = received_total = 0
    failures: list[str] = []
    with fake_stack() as outside:
        llm = outside.llm
        env = {**chat_env(llm, outside.scratch), "SEARXNG_URL": outside.searxng.url}
        folder = Path(env["DATA_DIR"]) / "conversations"
        for cycle in range(cycles):
            llm.script(Reply(text=STORY, chunk_delay=0.01))
            with serving(env) as (url, process):
                httpx.put(f"{url}/api/memory", json={"text": f"- cycle {cycle}\n"})
                conversation_id = httpx.post(f"{url}/api/conversations", json={}).json()["id"]
                received = stream_until_killed(
                    url, conversation_id, process, random.uniform(0.2, 3)
                )
                process.wait(timeout=10)
            with serving(env) as (url, _):
                kept, problems = check(url, folder, conversation_id, received)
                llm.script(Reply(text="Back."))
                chat = f"{url}/api/conversations/{conversation_id}/chat"
                if '"type": "done"' not in httpx.post(chat, json={"message": "again"}).text:
                    problems.append("a new turn was not accepted")
            kept_total += kept
            received_total += len(received)
            failures += [f"cycle {cycle}: {p}" for p in problems]
            print(f"cycle {cycle}: kept {kept} of {len(received)} chars", file=sys.stderr)
    share = kept_total / received_total if received_total else 1.0
    print(f"crash cycles: {cycles}; problems: {len(failures)}")
    print(f"streamed text kept: {kept_total:,} of {received_total:,} characters ({share:.1%})")
    for failure in failures:
        print(f"  {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
