"""A page's turn runs on the service, not on the connection that started it: a client that
leaves (a reload, a closed tab, a phone asleep) stops nothing, reattaches on any replica to
the events it missed, and Stop is a request of its own (app/chat/runs.py)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import expect

from app.chat import runs
from app.store import turn_events
from app.store.database import Database
from app.store.turns import Turns
from tests.browser import opened
from tests.chat_client import (
    Numbered,
    follow,
    get_conversation,
    leave_after,
    new_conversation,
    numbered,
)
from tests.chat_client import send as api_send
from tests.conftest import ChatService, chat_env, store_of, two_replicas
from tests.fakes.llm_server import Reply, ToolCall
from tests.page_actions import LONG_ANSWER, conversation_id, send, turns_ended, wait_turn_end
from tests.serving import serve

WORDS = "".join(f"word{n} " for n in range(80))
"""A slow answer: 80 deltas of about 6 characters, one every 50 ms (4 s)."""


def slow(delay: float = 0.05) -> Reply:
    return Reply(text=WORDS, split=6, chunk_delay=delay)


@pytest.fixture
def replicas(llm, pages, searxng, brave, tmp_path, database_url) -> Iterator[list[ChatService]]:
    """Two replicas of one database (one DATA_DIR's chat.db, or one PostgreSQL)."""
    llm.clear()
    env = chat_env(llm, tmp_path, pages, DATABASE_URL=database_url)
    with two_replicas(env, searxng.url) as started:
        yield started


def text_of(events: Numbered) -> str:
    return "".join(event["text"] for _, event in events if event["type"] == "delta")


def last_role(client: httpx.Client, conversation_id: str) -> str:
    return str(client.get(f"/api/conversations/{conversation_id}").json()["messages"][-1]["role"])


def chat_path(conversation_id: str) -> str:
    return f"/api/conversations/{conversation_id}/chat"


@pytest.mark.socket  # the client leaves its stream, as a reload does
def test_a_turn_outlives_its_client_and_a_reattach_on_another_replica_gets_exactly_the_rest(
    replicas, llm
):
    first, second = replicas
    llm.script(Reply(tool_calls=[ToolCall("web_search", {"query": "slow words"})]), slow())
    conversation_id = new_conversation(first)
    seen = leave_after(first, chat_path(conversation_id), {"message": "Words?"}, seconds=1.0)
    assert seen[-1][1]["type"] == "delta", "the answer was still coming when the client left"

    rest = follow(second, conversation_id, last_event_id=seen[-1][0])
    ids = [ident for ident, _ in seen + rest]
    assert ids == sorted(set(ids)), "an id repeated or went back"
    assert rest[-1][1]["type"] == "done" and rest[-1][1]["status"] == "complete"
    assert text_of(seen) + text_of(rest) == WORDS  # no gap, nothing twice
    assert rest[-1][1]["text"] == WORDS
    assert [e["type"] for _, e in seen + rest].count("search") == 1
    answering = llm.requests[-1]
    assert answering.completed and answering.hung_up_at is None  # never let go

    stored = get_conversation(first, conversation_id)["messages"][-1]
    assert (stored["status"], stored["content"]) == ("complete", WORDS)
    # From the start (?after=0), on either replica: the whole turn, its text coalesced.
    for replica in replicas:
        whole = follow(replica, conversation_id, after=0)
        assert [e["type"] for _, e in whole] == ["search", "delta", "done"]
        assert text_of(whole) == WORDS


@pytest.mark.socket  # the client leaves its stream
def test_stop_through_the_other_replica_closes_the_model_stream_and_keeps_what_came(replicas, llm):
    first, second = replicas
    llm.script(Reply(text="on and on ", split=5, chunk_delay=0.05, endless=True))
    conversation_id = new_conversation(first)
    seen = leave_after(first, chat_path(conversation_id), {"message": "Go on."}, seconds=1.0)
    assert llm.wait_hung_up(timeout=1.0) is None  # leaving stopped nothing

    stopped = second.http.post(f"/api/conversations/{conversation_id}/stop")
    assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
    # The answer is endless: only the Stop ends it (its delay, one poll of 0.25 s, is
    # measured in bench/chat_latency.py, not here, where a loaded machine took 2 s once).
    assert llm.wait_hung_up(timeout=10) is not None

    rest = follow(second, conversation_id, last_event_id=seen[-1][0])
    assert rest[-1][1] == {"type": "stopped"}
    stored = get_conversation(second, conversation_id)["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[-1]["status"] == "interrupted"
    assert stored[-1]["content"].strip() == (text_of(seen) + text_of(rest)).strip()
    # The conversation is free for the next message, on either replica.
    llm.script(Reply(text="Next."))
    assert api_send(first, conversation_id, "And now?")[-1]["type"] == "done"


@pytest.mark.socket  # the client leaves its stream
def test_stop_on_the_same_replica_answers_once_the_partial_is_kept(chat, llm):
    llm.script(Reply(text="more ", split=5, chunk_delay=0.05, endless=True))
    conversation_id = new_conversation(chat)
    leave_after(chat, chat_path(conversation_id), {"message": "Go on."}, seconds=0.5)
    listed = chat.http.get("/api/conversations").json()
    assert [c["running"] for c in listed if c["id"] == conversation_id] == [True]

    stopped = chat.http.post(f"/api/conversations/{conversation_id}/stop")
    assert stopped.json() == {"stopped": True}
    assert llm.wait_hung_up(timeout=1.0) is not None
    assert get_conversation(chat, conversation_id)["messages"][-1]["status"] == "interrupted"
    listed = chat.http.get("/api/conversations").json()
    assert [c["running"] for c in listed if c["id"] == conversation_id] == [False]
    again = chat.http.post(f"/api/conversations/{conversation_id}/stop")
    assert again.json() == {"stopped": False}


def test_with_no_turn_running_the_events_are_the_last_turns_end_at_once(chat, llm):
    conversation_id = new_conversation(chat)
    assert follow(chat, conversation_id) == []  # no turn ever ran
    llm.script(Reply(text="Kept."))
    done = api_send(chat, conversation_id, "Hello?")[-1]
    ended = follow(chat, conversation_id, after=10**6)
    assert ended == [] or ended[-1][1] == done
    assert follow(chat, conversation_id)[-1][1] == done
    missing = chat.http.get("/api/conversations/0123456789abcdef0123456789abcdef/events")
    assert missing.status_code == 404


def test_a_finished_turns_events_shrink_to_its_end_once_the_window_passed(
    chat_on_backend, llm, monkeypatch
):
    """Bounded: a turn's text is one row however many pieces it came in, and once the
    reconnection window after its end has passed, only its end is kept."""
    chat = chat_on_backend
    llm.script(Reply(tool_calls=[ToolCall("web_search", {"query": "kept"})]), slow(delay=0))
    earlier = new_conversation(chat)
    done = api_send(chat, earlier, "First?")[-1]
    assert [e["type"] for _, e in follow(chat, earlier)] == ["search", "delta", "done"]
    monkeypatch.setattr(turn_events, "WINDOW_SECONDS", 0.0)
    llm.script(Reply(text="Another."))
    api_send(chat, new_conversation(chat), "Elsewhere?")  # a new turn tidies the table
    assert [e for _, e in follow(chat, earlier)] == [done]


@pytest.mark.socket  # the client leaves its stream
def test_the_service_ending_stops_its_turns_and_keeps_what_came(llm, searxng, tmp_path):
    env = chat_env(llm, tmp_path)
    service = ChatService(env, searxng.url).start()
    llm.script(Reply(text="still ", split=5, chunk_delay=0.05, endless=True))
    conversation_id = new_conversation(service)
    seen = leave_after(service, chat_path(conversation_id), {"message": "Go."}, seconds=0.5)
    assert llm.wait_hung_up(timeout=1.0) is None  # the turn runs on without its client
    service.stop()
    assert llm.wait_hung_up(timeout=1.0) is not None
    database = Database(store_of(tmp_path / "data", ""))
    try:
        answer = database.load(conversation_id)["messages"][-1]
    finally:
        database.close()
    assert answer["status"] == "interrupted" and answer["content"].startswith(text_of(seen))


@pytest.mark.socket  # the client leaves its stream
def test_each_checkpoint_of_an_answer_comes_after_the_kept_events_that_sent_its_text(
    chat, llm, tmp_path, monkeypatch
):
    """What a crash leaves is the answer's last checkpoint, and a client reattaching on
    another replica is sent the kept events: they never say less than the checkpoint, even
    when the tick that writes them is late (a busy machine; here, a tick of 30 s)."""
    monkeypatch.setattr(runs, "TICK_SECONDS", 30.0)
    llm.script(Reply(text="on and on ", split=5, chunk_delay=0.02, endless=True))
    conversation_id = new_conversation(chat)
    leave_after(chat, chat_path(conversation_id), {"message": "Go on."}, seconds=0.5)
    kept = time.monotonic() + 10
    while last_role(chat.http, conversation_id) != "assistant":
        assert time.monotonic() < kept, "no checkpoint of the answer"
        time.sleep(0.05)
    database = Database(store_of(tmp_path / "data", ""))
    try:
        checkpoint = database.load(conversation_id)["messages"][-1]["content"]
        rows = database.turn_events(conversation_id, 0).rows
    finally:
        database.close()
    sent = text_of([(row.last, json.loads(row.event)) for row in rows])
    assert checkpoint and sent.startswith(checkpoint)
    assert chat.http.post(f"/api/conversations/{conversation_id}/stop").status_code == 200


def test_an_answers_outcome_is_written_after_the_kept_events_that_sent_its_text(
    chat, llm, monkeypatch
):
    """A turn's outcome releases its lease: a replica dying right after that write leaves
    a complete answer stored, and a client reattaching on another replica is sent the kept
    events. They hold the whole text when the outcome is written, however late the tick
    (here 30 s, on an answer too short for a checkpoint)."""
    monkeypatch.setattr(runs, "TICK_SECONDS", 30.0)
    kept_at_save: list[str] = []
    save_outcome = Turns.save_outcome

    def seen_then_saved(self, conversation_id, outcome, owner):
        rows = self.turn_events(conversation_id, 0).rows
        kept_at_save.append(text_of([(row.last, json.loads(row.event)) for row in rows]))
        return save_outcome(self, conversation_id, outcome, owner)

    monkeypatch.setattr(Turns, "save_outcome", seen_then_saved)
    llm.script(Reply(text="A short answer, whole.", split=4))
    conversation_id = new_conversation(chat)
    assert api_send(chat, conversation_id, "Quick?")[-1]["type"] == "done"
    assert kept_at_save == ["A short answer, whole."]


def test_a_replica_killed_mid_answer_leaves_its_partial_once_and_the_other_says_stopped(
    llm, searxng, tmp_path
):
    """SIGKILL of the turn's replica: a client reattaching on the other one gets what was
    kept, then `stopped`; the partial answer is stored once, and the next turn goes."""
    llm.clear()
    llm.script(Reply(text="on and on ", split=5, chunk_delay=0.02, endless=True))
    env = {**chat_env(llm, tmp_path), "SEARXNG_URL": searxng.url}
    killed = signal.SIGKILL
    with serve(env, ending=killed) as doomed_one, serve(env, ending=killed) as other_one:
        doomed, other = doomed_one.url, other_one.url
        with httpx.Client(base_url=doomed, timeout=30) as client:
            conversation_id = client.post("/api/conversations", json={}).json()["id"]
            path = chat_path(conversation_id)
            with client.stream("POST", path, json={"message": "Go on."}) as response:
                leaving = time.monotonic() + 1.5
                seen = numbered(response, until=lambda _: time.monotonic() >= leaving)
            kept = time.monotonic() + 10  # the kill comes once a partial answer is kept
            while last_role(client, conversation_id) != "assistant":
                assert time.monotonic() < kept, "no checkpoint of the answer"
                time.sleep(0.05)
        doomed_one.stop(signal.SIGKILL)
        with httpx.Client(base_url=other, timeout=30) as client:
            events = f"/api/conversations/{conversation_id}/events"
            headers = {"Last-Event-ID": str(seen[-1][0])}
            with client.stream("GET", events, headers=headers) as response:
                rest = numbered(response)
            assert rest[-1][1] == {"type": "stopped"}
            messages = client.get(f"/api/conversations/{conversation_id}").json()["messages"]
            assert [m["role"] for m in messages] == ["user", "assistant"]
            assert messages[-1]["status"] == "interrupted"
            assert (text_of(seen) + text_of(rest)).startswith(messages[-1]["content"])
            llm.script(Reply(text="Back."))
            with client.stream("POST", path, json={"message": "Still there?"}) as response:
                assert numbered(response)[-1][1]["type"] == "done"


@pytest.mark.parametrize("width", [1280, 390])
def test_a_reload_mid_answer_shows_the_answer_continuing_to_its_end(browser, chat, llm, width):
    with opened(browser, chat.url, width=width, height=860) as page:
        llm.script(Reply(tool_calls=[ToolCall("web_search", {"query": "slow words"})]), slow())
        send(page, "Words, slowly.")
        expect(page.locator(".answer").last).to_contain_text("word5 ")
        shown = conversation_id(page)
        page.reload()
        page.wait_for_selector("body[data-ready]", state="attached")
        page.ended_before = turns_ended(page)
        expect(page.locator("#stop")).to_be_visible()  # still answering, and followed
        running = page.locator(f'.conversation-item.streaming[data-id="{shown}"]')
        expect(running).to_have_count(1)
        expect(page.locator(".trail").last).to_contain_text("Searched 1×")  # the trail came too
        wait_turn_end(page)
        expect(page.locator(".message.assistant .answer")).to_have_count(1)
        expect(page.locator(".message.assistant .answer")).to_have_text(WORDS.strip())
        expect(page.locator(".badge.interrupted")).to_have_count(0)
        expect(running).to_have_count(0)
        assert llm.requests[-1].completed and llm.requests[-1].hung_up_at is None
        assert page.log.errors == []


def test_stop_on_the_page_is_a_request_and_keeps_what_came(page, chat, llm):
    llm.script(Reply(text=LONG_ANSWER, chunk_delay=0.05))
    send(page, "A long story.")
    expect(page.locator(".answer")).to_contain_text("Sentence number 2")
    page.locator("#stop").click()
    wait_turn_end(page)
    expect(page.locator(".badge.interrupted")).to_be_visible()
    assert llm.wait_hung_up(timeout=2) is not None
    stops = [r for r in page.log.responses if r[0] == "POST" and r[1].endswith("/stop")]
    assert [status for *_, status in stops] == [200]
    stored = get_conversation(chat, conversation_id(page))["messages"][-1]
    assert stored["status"] == "interrupted"
