"""Chat turns end to end: the real service on loopback, a real SearXNG with our engine and
the fake Brave API, the loopback page server, and a scripted fake model server."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

import pytest

from app.api import sse
from tests.chat_client import (
    Events,
    event_types,
    get_conversation,
    new_conversation,
    press_stop,
    send,
    stream,
)
from tests.conftest import ChatService, chat_env
from tests.fakes.llm_server import (
    Reply,
    ToolCall,
    content_filtered,
    invalid_api_key,
    rate_limited,
    server_error,
    tools_unsupported,
)


def tool_names(request) -> list[str]:
    return [tool["function"]["name"] for tool in request.body.get("tools", [])]


def test_a_turn_that_searches_fetches_then_answers(chat, llm, brave, pages):
    article = f"{pages.url}/article"
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "python asyncio"})]),
        Reply(tool_calls=[ToolCall("web_fetch", {"url": article})]),
        Reply(
            text="Asyncio runs coroutines on an event loop [1].",
            usage={"prompt_tokens": 900, "completion_tokens": 12},
        ),
    )
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, f"How does asyncio work? Start from {article}")

    assert event_types(events) == ["search", "fetch", "delta", "done"]
    search, fetch, done = events[0], events[1], events[-1]
    assert search["query"] == "python asyncio" and search["results"]
    assert fetch["url"] == article and fetch["chars"] > 0
    # The locale of the conversation reached Brave.
    assert brave.requests[-1].params["country"] == "PL"

    second, third = llm.requests[1].body["messages"], llm.requests[2].body["messages"]
    results = second[-1]
    assert results["role"] == "tool"
    assert results["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
    assert "Results for 'python asyncio'" in results["content"]
    assert " — " in results["content"]  # dated results, content included
    page_text = third[-1]["content"]
    assert third[-1]["role"] == "tool" and fetch["title"] in page_text

    assert done["status"] == "complete"
    assert done["usage"]["completion_tokens"] >= 12
    assert {s["url"] for s in done["sources"]} >= {article}
    stored = get_conversation(chat, conversation_id)["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["content"] == "Asyncio runs coroutines on an event loop [1]."
    assert [a["type"] for a in stored[1]["activity"]] == ["search", "fetch"]


def test_search_cap_withdraws_the_tool_and_the_model_answers(chat, llm, brave):
    search = Reply(tool_calls=[ToolCall("web_search", {"query": "rust"})])
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "rust 1"})]),
        Reply(tool_calls=[ToolCall("web_search", {"query": "rust 2"})]),
        Reply(tool_calls=[ToolCall("web_search", {"query": "rust 3"})]),
        search,
        Reply(text="Here is what I found."),
    )
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, "Tell me about rust")

    assert len([e for e in events if e["type"] == "search"]) == 3
    assert len(brave.requests) == 3
    assert "web_search" in tool_names(llm.requests[2])
    assert "web_search" not in tool_names(llm.requests[3])
    # The note told the model its allowance in plain words.
    assert "search 3 more time(s)" in llm.requests[0].body["messages"][0]["content"]
    assert events[-1]["type"] == "done"


def test_identical_repeated_call_is_not_run_twice(chat, llm, brave):
    call = ToolCall("web_search", {"query": "same thing"})
    llm.script(
        Reply(tool_calls=[call]),
        Reply(tool_calls=[ToolCall("web_search", {"query": "same thing"})]),
        Reply(text="Done."),
    )
    send(chat, new_conversation(chat), "question")
    assert len(brave.requests) == 1
    assert "repeated" in llm.requests[2].body["messages"][-1]["content"]


@pytest.mark.socket  # the test leaves its stream
def test_stop_closes_the_upstream_stream_and_keeps_the_partial_answer(chat, llm):
    llm.script(Reply(text="word " * 400, split=5, chunk_delay=0.05), Reply(text="A fresh answer."))
    conversation_id = new_conversation(chat)
    started = time.monotonic()
    events = send_until(chat, conversation_id, "Write a lot", deltas=3)
    stopped = time.monotonic()
    received = "".join(e["text"] for e in events if e["type"] == "delta")

    hung_up = llm.wait_hung_up(timeout=5)
    assert hung_up is not None, "the model server never saw the connection close"
    assert hung_up - stopped < 1.0
    assert not llm.requests[0].completed
    assert stopped - started < 10

    message = wait_for_assistant(chat, conversation_id)
    assert message["status"] == "interrupted"
    assert message["content"].startswith(received) and len(message["content"]) < len("word " * 400)
    assert [m["role"] for m in get_conversation(chat, conversation_id)["messages"]] == [
        "user",
        "assistant",
    ]

    events = stream(chat, f"/api/conversations/{conversation_id}/regenerate")
    assert events[-1]["type"] == "done"
    messages = get_conversation(chat, conversation_id)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"] == "A fresh answer." and messages[1]["status"] == "complete"


@pytest.mark.socket  # the test leaves its stream
def test_stop_before_the_first_token_reaches_the_model_server(chat, llm):
    """Stop is heard while nothing streams: the model server is let go at once and the
    conversation is free for the next message."""
    llm.script(Reply(silent=True), Reply(text="Here now."))
    conversation_id = new_conversation(chat)
    url = f"/api/conversations/{conversation_id}/chat"
    with chat.client() as client:
        with client.stream("POST", url, json={"message": "Anyone?"}) as response:
            assert response.status_code == 200
            deadline = time.monotonic() + 5
            while not llm.requests and time.monotonic() < deadline:
                time.sleep(0.02)
        stopped = time.monotonic()
        press_stop(chat, url)
    hung_up = llm.wait_hung_up(timeout=5)
    assert hung_up is not None and hung_up - stopped < 1.0
    assert send(chat, conversation_id, "Anyone now?")[-1]["type"] == "done"


def test_a_quiet_stream_is_kept_open_with_pings(chat, llm, monkeypatch):
    """A model slow to start would leave a proxy's idle timeout to cut the stream: comment
    lines (which an EventSource ignores) keep it open."""
    monkeypatch.setattr(sse, "PING_SECONDS", 0.2)
    llm.script(Reply(text=["Slow ", "answer."], chunk_delay=0.7))
    url = f"/api/conversations/{new_conversation(chat)}/chat"
    with chat.client() as client:
        with client.stream("POST", url, json={"message": "Take your time."}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-store"
            lines = [line for line in response.iter_lines() if line]
    first_data = next(n for n, line in enumerate(lines) if line.startswith("data: "))
    assert ": ping" in lines[:first_data]
    assert json.loads(lines[-1][len("data: ") :])["type"] == "done"


def test_turns_reuse_one_connection_to_the_model_server(chat, llm):
    """A stream read to its end after [DONE] keeps its connection: no connect per turn."""
    llm.script(*(Reply(text=f"answer {n}", split=3) for n in range(3)))
    conversation_id = new_conversation(chat)
    for n in range(3):
        assert send(chat, conversation_id, f"question {n}")[-1]["type"] == "done"
    assert len({r.client_port for r in llm.requests}) == 1


def test_a_long_history_reaches_the_model_server_whole(chat, llm):
    """Past LARGE_REQUEST_CHARS the request is encoded in a thread, a message at a time."""
    pasted = 'Zażółć gęślą jaźń "cytat" \\ ✓\n' * 4_000  # about 125,000 characters
    llm.script(Reply(text="Read it."), Reply(text="Read that too."), Reply(text="Still here."))
    conversation_id = new_conversation(chat)
    send(chat, conversation_id, pasted)
    send(chat, conversation_id, pasted.upper())
    assert send(chat, conversation_id, "and now?")[-1]["type"] == "done"
    sent = llm.requests[2].body
    assert [m["content"] for m in sent["messages"] if m["role"] != "system"] == [
        pasted,
        "Read it.",
        pasted.upper(),
        "Read that too.",
        "and now?",
    ]
    assert sent["model"] and sent["stream"] is True


def send_until(chat, conversation_id: str, message: str, deltas: int) -> Events:
    return stream(
        chat,
        f"/api/conversations/{conversation_id}/chat",
        {"message": message},
        stop=lambda events: sum(e["type"] == "delta" for e in events) >= deltas,
    )


def wait_for_assistant(chat, conversation_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        messages = get_conversation(chat, conversation_id)["messages"]
        if messages and messages[-1]["role"] == "assistant":
            return messages[-1]
        time.sleep(0.05)
    pytest.fail("the interrupted answer was never stored")


@pytest.mark.parametrize(
    ("reply", "kind", "recovery"),
    [
        (invalid_api_key(), "auth", "fix_settings"),
        (rate_limited(retry_after=7), "rate_limit", "retry_later"),
        (content_filtered(), "content_filter", "rewind"),
        (server_error(500), "upstream", "retry"),
    ],
)
def test_failure_before_any_output_returns_the_message(chat, llm, reply, kind, recovery):
    llm.script(reply)
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, "my carefully written question")
    error = events[-1]
    assert error["type"] == "error" and error["kind"] == kind and error["recovery"] == recovery
    assert error["restore"] == "my carefully written question"
    assert get_conversation(chat, conversation_id)["messages"] == []
    if kind == "rate_limit":
        assert error["retry_after"] == 7


def test_broken_stream_keeps_the_partial_answer_marked(chat, llm):
    llm.script(Reply(text="The first part of an answer that", split=4, break_after=3))
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, "question")
    assert events[-1]["type"] == "error" and events[-1]["kind"] == "network"
    assert events[-1]["restore"] is None
    messages = get_conversation(chat, conversation_id)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["status"] == "error" and messages[1]["content"]


def test_content_filter_after_text_still_rewinds(chat, llm):
    llm.script(Reply(text="Some text", finish_reason="content_filter"))
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, "edit me")
    assert events[-1]["kind"] == "content_filter" and events[-1]["restore"] == "edit me"
    assert get_conversation(chat, conversation_id)["messages"] == []


def test_model_rejecting_tools_gets_one_retry_without_them(chat, llm):
    llm.script(tools_unsupported(), Reply(text="Answer without tools."))
    events = send(chat, new_conversation(chat), "question")
    assert any(
        e["type"] == "warning" and "the service searches for it instead" in e["message"]
        for e in events
    )
    assert events[-1]["type"] == "done"
    assert "tools" in llm.requests[0].body and "tools" not in llm.requests[1].body


TOOL_NOTE_START = "You can look things up."


def search_steps() -> list[Reply]:
    """The model's query, and no page to read, in the search-first steps of an answer
    without tool calling."""
    return [Reply(text='{"query": "the question"}'), Reply(text='{"read": 0}')]


def system_text(request) -> str:
    return request.body["messages"][0]["content"]


def tool_refusals(chat) -> list[dict[str, str]]:
    return chat.http.get("/api/config").json()["tool_refusals"]


def test_a_model_that_rejected_tools_is_not_offered_them_again(chat, llm):
    llm.script(
        tools_unsupported(),
        *search_steps(),
        Reply(text="First, without tools."),
        *search_steps(),
        Reply(text="Second."),
    )
    conversation_id = new_conversation(chat)
    first = send(chat, conversation_id, "question")
    learnt = next(e for e in first if e["type"] == "warning")
    assert learnt["tools_refused"]["model"] == "fake-model"
    assert "does not support tools" in learnt["tools_refused"]["reason"]
    # The retry drops the tool note with the tools, and the context bar counts neither.
    assert TOOL_NOTE_START in system_text(llm.requests[0])
    assert TOOL_NOTE_START not in system_text(llm.requests[3])
    assert first[-1]["budget"]["parts"]["tools"] == 0

    second = send(chat, conversation_id, "another question")
    searched = {"search", "search_wait"}  # the search made first: the model cannot call tools
    assert [t for t in event_types(second) if t not in searched] == ["warning", "delta", "done"]
    assert "web tools not offered" in second[0]["message"]
    assert "does not support tools" in second[0]["message"]
    assert "tools" not in llm.requests[6].body
    assert TOOL_NOTE_START not in system_text(llm.requests[6])
    assert second[-1]["budget"]["parts"]["tools"] == 0
    assert sum("tools" in r.body for r in llm.requests) == 1  # refused once, never again
    stored = get_conversation(chat, conversation_id)["messages"][-1]
    assert stored["warnings"] == [second[0]["message"]]


def test_a_tool_refusal_survives_a_restart_until_the_user_clears_it(llm, searxng, tmp_path):
    model = "library/qwen3:8b"  # a slash in the id, as Ollama's and hosted ids have
    env = chat_env(llm, tmp_path, MODELS=f"fake-model,{model}")
    llm.clear()
    llm.script(tools_unsupported(model), Reply(text="Without tools."))
    service = ChatService(env, searxng.url, socket=False).start()
    try:
        conversation_id = new_conversation(service, model=model)
        send(service, conversation_id, "question")
        assert [r["model"] for r in tool_refusals(service)] == [model]
    finally:
        service.stop()

    llm.script(Reply(text="Still without."), Reply(text="With tools again."))
    service = ChatService(env, searxng.url, socket=False).start()
    try:
        refusal = tool_refusals(service)[0]
        assert refusal["model"] == model and "does not support tools" in refusal["reason"]
        send(service, conversation_id, "after the restart")
        assert "tools" not in llm.requests[-1].body

        url = f"/api/models/tool-refusals/{quote(model, safe='')}"
        assert service.http.delete(url).status_code == 204
        assert tool_refusals(service) == []
        assert service.http.delete(url).status_code == 404  # nothing left to forget
        send(service, conversation_id, "and now?")
        assert tool_names(llm.requests[-1]) == ["web_search", "web_fetch"]
        assert TOOL_NOTE_START in system_text(llm.requests[-1])
        # The other model never refused the tools: nothing to forget.
        assert service.http.delete("/api/models/tool-refusals/fake-model").status_code == 404
    finally:
        service.stop()


def test_llama_cpp_tool_parse_failure_retries_without_tools(chat, llm):
    # llama-server accepts tools for any model, then fails when the output does not parse
    # as a tool call (seen with a real llama-server and a base model).
    unparsed = Reply(
        status=500,
        error={
            "error": {
                "code": 500,
                "message": "The model produced output that does not match the expected "
                "peg-native format",
                "type": "server_error",
            }
        },
    )
    llm.script(unparsed, *search_steps(), Reply(text="Answer without tools."), Reply(text="Next."))
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, "question")
    assert any(
        e["type"] == "warning" and "the service searches for it instead" in e["message"]
        for e in events
    )
    assert events[-1]["text"] == "Answer without tools."
    assert not any("tools" in r.body for r in llm.requests[1:4])
    # One output that did not parse says nothing of the next: the tools are offered again.
    assert tool_refusals(chat) == []
    send(chat, conversation_id, "next question")
    assert "tools" in llm.requests[4].body


def test_failed_search_goes_to_the_model_as_text_and_to_the_user(chat, llm, brave):
    brave.fail_next(422, "VALIDATION")
    llm.script(Reply(tool_calls=[ToolCall("web_search", {"query": "x"})]), Reply(text="Sorry."))
    events = send(chat, new_conversation(chat), "question")
    assert any(e["type"] == "warning" and "search failed" in e["message"] for e in events)
    assert llm.requests[1].body["messages"][-1]["content"].startswith("search failed")


def test_second_turn_on_the_same_conversation_is_refused_while_one_runs(chat, llm):
    llm.script(Reply(text="slow " * 100, split=5, chunk_delay=0.05), Reply(text="next"))
    conversation_id = new_conversation(chat)
    with chat.client() as client:
        with client.stream(
            "POST", f"/api/conversations/{conversation_id}/chat", json={"message": "one"}
        ) as first:
            lines = first.iter_lines()  # kept: a dropped iterator closes the stream
            next(lines)
            second = client.post(
                f"/api/conversations/{conversation_id}/chat", json={"message": "two"}
            )
            assert second.status_code == 409
            renamed = client.patch(
                f"/api/conversations/{conversation_id}", json={"title": "Renamed"}
            )
            assert renamed.status_code == 200
            for _line in lines:
                pass
    stored = get_conversation(chat, conversation_id)
    assert stored["title"] == "Renamed"  # the turn's own write did not undo the rename
    assert [m["content"] for m in stored["messages"] if m["role"] == "user"] == ["one"]


@pytest.mark.parametrize("bad", ["ABC", "..%2F..%2Fetc", "x" * 80, "bad id!"])
def test_malformed_id_is_refused_and_touches_nothing(chat, bad):
    data = chat.settings.data_dir
    before = sorted(data.rglob("*")) if data.exists() else []
    for method, path in [
        ("GET", f"/api/conversations/{bad}"),
        ("PATCH", f"/api/conversations/{bad}"),
        ("DELETE", f"/api/conversations/{bad}"),
        ("POST", f"/api/conversations/{bad}/chat"),
    ]:
        response = chat.http.request(method, path, json={"message": "x", "title": "t"})
        assert response.status_code in (404, 422), (method, response.status_code)
    after = sorted(data.rglob("*")) if data.exists() else []
    assert after == before


def test_bad_input_gets_a_clear_error(chat):
    conversation_id = new_conversation(chat)
    url = f"/api/conversations/{conversation_id}"
    assert chat.http.post(f"{url}/chat", json={"message": "  "}).status_code == 422
    bad_prompt = chat.http.patch(url, json={"settings": {"compress_prompt": "Summarise please"}})
    assert bad_prompt.status_code == 422 and "{transcript}" in bad_prompt.json()["detail"]
    assert chat.http.patch(url, json={"settings": {"context_budget": "big"}}).status_code == 422
    assert chat.http.patch(url, json={"settings": {"search_locale": "polish"}}).status_code == 422
    assert get_conversation(chat, conversation_id)["settings"]["context_budget"] == 102_400
