"""The chat service against a real llama.cpp server (issue 10): the protocol as llama-server
speaks it, not as our fakes imagine it. The model is a tiny base model whose words mean
nothing, so these tests assert events, counts and stored state, never text.

The first run builds llama-server (5-10 minutes, said on the terminal); later runs reuse it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.chat import context
from tests.chat_client import Events, get_conversation, new_conversation, send, stream
from tests.chat_client import done as done_of
from tests.conftest import ChatService, run_cli
from tests.llama_server import MODEL_ALIAS, llama, tiny_llama
from tests.llama_turns import ENDLESS, ENGLISH, QUIET, SAMPLES, service_env

__all__ = ["llama", "tiny_llama"]  # fixtures, imported to be used here


@pytest.fixture
def service(llama, searxng, tmp_path) -> Iterator[ChatService]:
    chat = ChatService(service_env(llama, tmp_path), searxng.url).start()
    yield chat
    chat.stop()


def deltas(events: Events) -> str:
    return "".join(e["text"] for e in events if e["type"] == "delta")


def test_a_streamed_turn_ends_with_done_and_the_servers_own_usage(service, llama):
    predicted = llama.metric("llamacpp:tokens_predicted_total")
    conversation_id = new_conversation(service, **QUIET)
    events = send(service, conversation_id, "Hello, who are you?")
    done = done_of(events)
    assert done["status"] == "complete" and done["usage"]["reported"]
    usage = done["usage"]
    # The counts are the server's: what it generated for this one request.
    assert usage["requests"] == 1
    assert usage["completion_tokens"] == llama.metric("llamacpp:tokens_predicted_total") - predicted
    assert 0 < usage["completion_tokens"] <= 24
    assert usage["prompt_tokens"] > context.estimate_tokens("Hello, who are you?")
    stored = get_conversation(service, conversation_id)
    assert stored["messages"][-1]["content"] == deltas(events)
    assert stored["totals"]["prompt_tokens"] == usage["prompt_tokens"]


def test_the_measured_prompt_feeds_the_next_turns_projection(service):
    conversation_id = new_conversation(service, **QUIET)
    first = done_of(send(service, conversation_id, ENGLISH))
    measured = get_conversation(service, conversation_id)["usage"]["last_prompt_tokens"]
    assert measured >= first["budget"]["used"] == first["usage"]["prompt_tokens"]

    second = done_of(send(service, conversation_id, "And the firewall?"))
    reserve = context.completion_reserve(24, second["budget"]["limit"])
    expected = context.projected_tokens(measured, "And the firewall?", reserve)
    assert second["budget"]["projected"] == expected
    assert second["budget"]["used"] > first["budget"]["used"]


def test_the_window_read_from_props_caps_the_budget(service, llama):
    props = httpx.get(f"{llama.url}/props").json()
    assert props["default_generation_settings"]["n_ctx"] == llama.ctx_size
    # A budget chosen above the served window is refused, naming the window...
    chosen = {"settings": {"context_budget": 100_000, **QUIET}}
    refused = httpx.post(f"{service.url}/api/conversations", json=chosen)
    assert refused.status_code == 422 and "at most 8,192 tokens" in refused.json()["detail"]
    # ...and the default one (CONTEXT_BUDGET_TOKENS, 102,400) is capped to it.
    conversation_id = new_conversation(service, **QUIET)
    budget = done_of(send(service, conversation_id, "Hi"))["budget"]
    assert budget["window"] == llama.ctx_size == 8192
    assert budget["limit"] == 8192  # not the default 102,400


def test_stop_leaves_the_server_idle_and_the_partial_answer_stored_once(service, llama):
    conversation_id = new_conversation(service, **QUIET)
    events = stream(
        service,
        f"/api/conversations/{conversation_id}/chat",
        {"message": "Write a long story.", "model": ENDLESS},
        stop=lambda events: sum(e["type"] == "delta" for e in events) >= 3,
    )
    llama.wait_idle(timeout=5)  # the hang-up reached the server's slot
    received = deltas(events)
    message = wait_for_answer(service, conversation_id, status="interrupted")
    assert message["content"].startswith(received)
    roles = [m["role"] for m in get_conversation(service, conversation_id)["messages"]]
    assert roles == ["user", "assistant"]

    # Regenerate replaces the interrupted answer with a complete one, in the same place.
    regenerate = f"/api/conversations/{conversation_id}/regenerate"
    done_of(stream(service, regenerate, {"model": MODEL_ALIAS}))
    messages = get_conversation(service, conversation_id)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["status"] == "complete" and messages[1]["model"] == MODEL_ALIAS


def wait_for_answer(chat: ChatService, conversation_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        messages = get_conversation(chat, conversation_id)["messages"]
        if messages[-1]["role"] == "assistant" and messages[-1]["status"] == status:
            return messages[-1]
        time.sleep(0.05)
    pytest.fail(f"no {status} answer stored: {messages[-1]}")


def test_compression_by_the_real_model_holds_whatever_it_writes(llama, searxng, tmp_path):
    env = service_env(llama, tmp_path, KEEP_RECENT_MESSAGES="2")
    chat = ChatService(env, searxng.url).start()
    try:
        conversation_id = new_conversation(chat, context_budget=1000, **QUIET)
        # The second turn's projection passes the budget of 1,000: compression runs.
        done_of(send(chat, conversation_id, ENGLISH * 3))
        events = send(chat, conversation_id, ENGLISH * 3)
        summarized = get_conversation(chat, conversation_id)["summarized"]
    finally:
        chat.stop()
    done_of(events)
    # Either the tiny model wrote usable JSON, or the fallback dropped the old messages and
    # said so; both leave the turn answered and the old messages out of the next request.
    folded = [e for e in events if e["type"] == "compression"]
    dropped = [e for e in events if e["type"] == "warning" and "compression failed" in e["message"]]
    assert len(folded) + len(dropped) == 1
    assert summarized >= 1


def test_a_context_overflow_is_classified_and_the_message_given_back(tiny_llama, searxng, tmp_path):
    chat = ChatService(service_env(tiny_llama, tmp_path), searxng.url).start()
    try:
        conversation_id = new_conversation(chat, **QUIET)
        too_long = ENGLISH * 12  # about 1,600 tokens in a window of 1,024
        error = send(chat, conversation_id, too_long)[-1]
        assert error["type"] == "error" and error["kind"] == "context_overflow", error
        assert error["recovery"] == "compress_and_retry" and error["restore"] == too_long
        assert get_conversation(chat, conversation_id)["messages"] == []
        done_of(send(chat, conversation_id, "A short one, then."))
    finally:
        chat.stop()


def test_an_overflow_the_projection_missed_is_compressed_and_retried(tiny_llama, searxng, tmp_path):
    env = service_env(tiny_llama, tmp_path, KEEP_RECENT_MESSAGES="2")
    chat = ChatService(env, searxng.url).start()
    try:
        conversation_id = new_conversation(chat, **QUIET)
        done_of(send(chat, conversation_id, ENGLISH * 3))
        # A longer system prompt: the next projection builds on the last measured prompt,
        # which had the short one, so only the server finds out that the request is too big.
        persona = {"settings": {"system_prompt": ENGLISH * 5}}
        url = f"{chat.url}/api/conversations/{conversation_id}"
        assert httpx.patch(url, json=persona).status_code == 200
        events = send(chat, conversation_id, "Thanks.")
        summarized = get_conversation(chat, conversation_id)["summarized"]
    finally:
        chat.stop()
    budget = done_of(events)["budget"]
    # Projected within the window, so the compression below is the overflow's recovery.
    assert budget["window"] == budget["limit"] == 1024 and budget["projected"] < 1024
    assert [e["type"] for e in events if e["type"] in ("compression", "warning")]
    assert summarized >= 1


def test_tool_declarations_the_model_cannot_honour_are_retried_without_tools(service):
    # Greedy, with only the date line and the template's tool offer as system text, the tiny
    # model echoes that offer and writes a call that does not parse.
    conversation_id = new_conversation(service, web_search=True, system_prompt="", tool_note="")
    events = send(service, conversation_id, "The weather in Kraków?")
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert any("searches for it instead" in message for message in warnings), events[-1]
    assert done_of(events)["status"] == "complete"
    # The text streamed before the error chunk is taken back, on the page and in storage.
    retried = [n for n, e in enumerate(events) if e["type"] == "retry"]
    assert len(retried) == 1 and events[retried[0]]["text"] == ""
    stored = get_conversation(service, conversation_id)["messages"][-1]
    assert stored["content"] == deltas(events[retried[0] :])


def test_doctor_reports_the_server_its_model_and_its_window(llama, searxng):
    run = run_cli(
        "doctor",
        searxng_url=searxng.url,
        LLM_BASE_URL=llama.api_base,
        DEFAULT_MODEL=MODEL_ALIAS,
        MODELS="",
    )
    lines = {
        line.split(":", 1)[0].split("  ", 1)[-1].strip(): line for line in run.stdout.splitlines()
    }
    assert lines["model server reachable"].startswith("ok") and llama.api_base in run.stdout
    assert "1 model listed" in lines["model server reachable"]
    assert f"tool calling accepted by {MODEL_ALIAS}" in lines
    assert (
        lines["served context window"].startswith("ok") and "8192" in lines["served context window"]
    )


@pytest.mark.parametrize("sample", [path.stem for path in sorted(SAMPLES.glob("*.txt"))])
def test_the_token_estimate_is_never_below_the_real_count(llama, sample):
    text = (SAMPLES / f"{sample}.txt").read_text()
    assert context.estimate_tokens(text) >= llama.token_count(text)
