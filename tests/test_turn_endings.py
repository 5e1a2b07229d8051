"""Every way a turn ends has its event and its log line, and nothing another request does
meanwhile can undo or interleave with it (issue 8: the races and silent endings found in
review, each reproduced here)."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from app.chat.tools import ToolRunner
from app.store.database import Database
from tests.chat_client import get_conversation, new_conversation, send
from tests.conftest import ChatService, chat_env
from tests.fakes.llm_server import Reply, ToolCall, invalid_api_key

SLOW = Reply(text=[f"piece {n} " for n in range(60)], chunk_delay=0.05)


def streaming_in_background(chat, conversation_id: str, message: str) -> threading.Thread:
    thread = threading.Thread(target=send, args=(chat, conversation_id, message), daemon=True)
    thread.start()
    return thread


def wait_until_running(chat, conversation_id: str) -> None:
    """Asked on a connection of its own: one SQLite connection used from two threads at
    once (the service's storage thread and this one) can deadlock."""
    database = Database(chat.settings.data_dir / "chat.db")
    try:
        deadline = time.monotonic() + 10
        while not database.held(conversation_id):
            assert time.monotonic() < deadline, "the turn never started"
            time.sleep(0.01)
    finally:
        database.close()


def test_a_rewind_or_delete_during_a_turn_is_refused_and_the_turn_lands(chat, llm):
    llm.script(SLOW)
    conversation_id = new_conversation(chat)
    thread = streaming_in_background(chat, conversation_id, "Tell me slowly.")
    wait_until_running(chat, conversation_id)
    url = f"/api/conversations/{conversation_id}"
    assert chat.http.post(f"{url}/rewind", json={}).status_code == 409
    assert chat.http.delete(url).status_code == 409
    thread.join(timeout=30)
    stored = get_conversation(chat, conversation_id)["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["status"] == "complete" and stored[1]["content"].startswith("piece 0")


def test_a_turn_sent_the_moment_the_previous_one_ends_is_accepted(chat, llm):
    conversation_id = new_conversation(chat)
    for n in range(15):
        llm.script(Reply(text=f"answer {n}"))
        events = send(chat, conversation_id, f"question {n}")
        assert events[-1]["type"] == "done", events[-1]
    stored = get_conversation(chat, conversation_id)["messages"]
    assert [m["content"] for m in stored[-2:]] == ["question 14", "answer 14"]
    assert len(stored) == 30  # each answer after its own question, none lost


def test_an_unexpected_failure_is_an_error_event_with_the_text_kept(chat, llm, monkeypatch, caplog):
    async def broken(self, call):
        raise RuntimeError("a bug in a tool")

    monkeypatch.setattr(ToolRunner, "run", broken)
    llm.script(
        Reply(text="Let me look that up.", tool_calls=[ToolCall("web_search", {"query": "x"})])
    )
    conversation_id = new_conversation(chat)
    with caplog.at_level(logging.ERROR, logger="app.chat.turn"):
        events = send(chat, conversation_id, "Search something.")
    error = events[-1]
    assert error["type"] == "error" and error["kind"] == "internal"
    assert "a bug in a tool" in error["message"] and error["restore"] is None
    stored = get_conversation(chat, conversation_id)["messages"][-1]
    assert stored["status"] == "error" and stored["content"] == "Let me look that up."
    assert any("failed unexpectedly" in r.message and r.exc_info for r in caplog.records)


def failing_turn_writes(monkeypatch) -> list[int]:
    """Make every write of a turn's outcome fail; the count of tries is returned."""
    tries: list[int] = []

    def save_outcome(self, conversation_id, outcome, owner):
        tries.append(1)
        raise OSError("disk full")

    monkeypatch.setattr(Database, "save_outcome", save_outcome)
    return tries


def test_a_failed_write_is_retried_then_reported(chat, llm, monkeypatch, caplog):
    conversation_id = new_conversation(chat)
    tries = failing_turn_writes(monkeypatch)
    llm.script(Reply(text="An answer that cannot be saved."))
    with caplog.at_level(logging.ERROR, logger="app.chat.turn"):
        events = send(chat, conversation_id, "Hello?")
    assert len(tries) >= 2
    warning = next(e for e in events if e["type"] == "warning")
    assert "could not be saved" in warning["message"]
    assert events[-1]["type"] == "done"
    assert any("disk full" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    # The lease goes with a written outcome; unwritten, it is still released.
    monkeypatch.undo()
    llm.script(Reply(text="Saved this time."))
    assert send(chat, conversation_id, "Again?")[-1]["type"] == "done"


def test_a_failed_write_never_masks_the_error_that_ended_the_turn(chat, llm, monkeypatch):
    conversation_id = new_conversation(chat)
    failing_turn_writes(monkeypatch)
    llm.script(invalid_api_key())
    events = send(chat, conversation_id, "Hello?")
    assert events[-1]["type"] == "error" and events[-1]["kind"] == "auth"


@pytest.mark.parametrize(
    "arguments", [{"query": 42}, {"query": ["a", "b"]}, {"query": "x", "locale": 5}]
)
def test_tool_arguments_of_the_wrong_type_are_a_tool_error_the_model_reads(chat, llm, arguments):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", arguments)]),
        Reply(text="Answered without searching."),
    )
    events = send(chat, new_conversation(chat), "Search please.")
    assert events[-1]["type"] == "done"
    warning = next(e for e in events if e["type"] == "warning")
    assert "instead of text" in warning["message"]
    tool_message = llm.requests[-1].body["messages"][-1]
    assert tool_message["role"] == "tool" and "instead of text" in tool_message["content"]


def test_a_memory_edit_during_compression_is_kept(llm, searxng, tmp_path):
    llm.clear()
    env = chat_env(llm, tmp_path, KEEP_RECENT_MESSAGES="2", MAX_COMPLETION_TOKENS="200")
    service = ChatService(env, searxng.url, socket=False).start()
    try:
        conversation_id = new_conversation(
            service, context_budget=1000, web_search=False, web_fetch=False
        )
        llm.script(Reply(text="Noted.", usage={"prompt_tokens": 900, "completion_tokens": 5}))
        send(service, conversation_id, "I run Debian on my servers. " * 30)
        summary = json.dumps({"summary": "Debian servers.", "facts": ["User runs Debian"]})
        llm.script(
            Reply(text=[summary], chunk_delay=1.0),  # the summary call takes a second
            Reply(text="Second answer."),
        )
        thread = streaming_in_background(service, conversation_id, "And packaging? " * 30)
        deadline = time.monotonic() + 10
        while len(llm.requests) < 2:
            assert time.monotonic() < deadline, "no summary call"
            time.sleep(0.01)
        edit = service.http.put("/api/memory", json={"text": "- Written by hand\n"})
        assert edit.status_code == 200
        thread.join(timeout=30)
        memory = service.http.get("/api/memory").json()["text"]
        assert "- Written by hand" in memory and "User runs Debian" in memory
    finally:
        service.stop()
