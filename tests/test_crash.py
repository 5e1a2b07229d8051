"""What the user saw survives a crash: the service is killed (SIGKILL) while an answer
streams, and after a restart the conversation holds the text up to the last checkpoint,
marked interrupted, with the user's message once and no leftover temporary file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from app.embedded_searxng import free_port
from tests.conftest import ROOT, chat_env
from tests.fakes.llm_server import Reply

CYCLES = 3


@contextmanager
def serving(env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen]]:
    """`python -m app serve` as a user runs it, in its own process."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert process.poll() is None and time.monotonic() < deadline, "the service did not start"
        time.sleep(0.05)
    try:
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def received_before_kill(url: str, conversation_id: str, process: subprocess.Popen) -> str:
    """Stream an answer, and kill the service once text has flowed for a while."""
    text = ""
    started = time.monotonic()
    path = f"{url}/api/conversations/{conversation_id}/chat"
    with httpx.stream("POST", path, json={"message": "Tell me a long story."}, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[len("data: ") :])
                text += event.get("text", "") if event["type"] == "delta" else ""
            if time.monotonic() - started > 1.5 and text:
                process.send_signal(signal.SIGKILL)
                break
    return text


def test_the_streamed_text_survives_a_sigkill(llm, searxng, tmp_path):
    llm.clear()
    env = {**chat_env(llm, tmp_path), "SEARXNG_URL": searxng.url}
    story = [f"Sentence {n} of the story. " for n in range(400)]
    for cycle in range(CYCLES):
        llm.script(Reply(text=story, chunk_delay=0.02))
        with serving(env) as (url, process):
            created = httpx.post(f"{url}/api/conversations", json={})
            conversation_id = created.json()["id"]
            received = received_before_kill(url, conversation_id, process)
            process.wait(timeout=10)
        folder = Path(env["DATA_DIR"]) / "conversations"
        (folder / f".{conversation_id}.json.crash{cycle}.tmp").write_text("half a write")
        with serving(env) as (url, _process):
            stored = httpx.get(f"{url}/api/conversations/{conversation_id}").json()
            assert not list(folder.glob(".*.tmp")), "a leftover temporary file stayed"
            user, answer = stored["messages"]
            assert user["content"] == "Tell me a long story."
            assert answer["status"] == "interrupted"
            assert received.startswith(answer["content"]) and answer["content"]
            # Checkpoints come every half second: little of what was seen is lost.
            assert len(answer["content"]) >= len(received) * 0.3, (
                len(answer["content"]),
                len(received),
            )
            llm.script(Reply(text="The service answers again."))
            again = httpx.post(
                f"{url}/api/conversations/{conversation_id}/chat", json={"message": "Still there?"}
            )
            assert again.status_code == 200 and '"type": "done"' in again.text
