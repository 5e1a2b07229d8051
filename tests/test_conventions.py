"""Other servers' conventions, end to end: Ollama, vLLM, LM Studio and hosted gateways, each
replayed in its own shapes (tests/fakes/conventions.py), through the real chat service.

Each test checks what the user would see: the answer streamed, the thinking shown apart,
tokens, cache hits and cost counted once in the conversation's totals, the window the
server really runs with capping the budget, and each failure given its own kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from app import config
from app.model.failures import classify
from app.model.tool_calls import could_be_call, parse_text_calls
from tests.chat_client import (
    Events,
    done,
    event_types,
    get_conversation,
    new_conversation,
    send,
    stream,
)
from tests.conftest import ChatService, chat_env
from tests.fakes.conventions import (
    llamacpp_stream_unparsed,
    lmstudio_context_overflow,
    lmstudio_routes,
    lmstudio_stream,
    ollama_routes,
    ollama_stream,
    ollama_tools_unsupported,
    openai_style_stream,
    openrouter_stream,
    openrouter_stream_failing,
    text_tool_call,
    vllm_error,
    vllm_old_stream_error,
    vllm_stream,
    vllm_stream_failing,
    vllm_tools_unsupported,
)
from tests.fakes.llm_server import FakeLLM, Reply, Route

OLLAMA_MODEL = "qwen3:8b"
SEARCH_TOOLS = frozenset({"web_search", "web_fetch"})


@contextmanager
def served(
    searxng, tmp_path, model: str = OLLAMA_MODEL, routes: dict[tuple[str, str], Route] | None = None
) -> Iterator[tuple[FakeLLM, ChatService]]:
    """A chat service on a model server of its own, serving `model` (and a summary model)."""
    with FakeLLM(models=[model, "fake-small"], routes=routes) as fake:
        env = chat_env(fake, tmp_path, MODELS=f"{model},fake-small", DEFAULT_MODEL=model)
        service = ChatService(env, searxng.url).start()
        try:
            yield fake, service
        finally:
            service.stop()


def one_turn(chat: ChatService, message: str = "What is the capital of Poland?") -> Events:
    return converse(chat, message)[1]


def converse(chat: ChatService, message: str) -> tuple[str, Events]:
    conversation_id = new_conversation(chat)
    return conversation_id, send(chat, conversation_id, message)


def text_of(events: Events, kind: str = "delta") -> str:
    return "".join(e["text"] for e in events if e["type"] == kind)


def failure(events: Events) -> dict[str, Any]:
    assert events[-1]["type"] == "error", events[-3:]
    return events[-1]


# -- Ollama --------------------------------------------------------------------------------------


def test_ollama_thinking_answer_and_usage_after_the_finish_chunk(searxng, tmp_path):
    with served(searxng, tmp_path, routes=ollama_routes(OLLAMA_MODEL, loaded=32768)) as (
        fake,
        chat,
    ):
        fake.script(
            ollama_stream(
                OLLAMA_MODEL,
                ["Warsaw ", "is the capital."],
                reasoning=["The user asks", " about Poland."],
                prompt_tokens=812,
                completion_tokens=37,
            )
        )
        events = one_turn(chat)
        asked = fake.requests[-1].body
    assert event_types(events) == ["reasoning", "delta", "done"]
    assert text_of(events, "reasoning") == "The user asks about Poland."
    assert text_of(events) == "Warsaw is the capital."
    end = done(events)
    assert (end["usage"]["prompt_tokens"], end["usage"]["completion_tokens"]) == (812, 37)
    assert end["totals"]["prompt_tokens"] == 812 and end["totals"]["turns_unreported"] == 0
    # Ollama sends usage only when asked: the service always asks.
    assert asked["stream_options"] == {"include_usage": True}


def test_ollama_tool_call_arriving_whole_in_one_chunk_runs_the_search(searxng, brave, tmp_path):
    with served(searxng, tmp_path, routes=ollama_routes(OLLAMA_MODEL, loaded=32768)) as (
        fake,
        chat,
    ):
        fake.script(
            ollama_stream(OLLAMA_MODEL, [], tool_calls=[("web_search", {"query": "Warszawa"})]),
            ollama_stream(OLLAMA_MODEL, ["Warsaw."]),
        )
        events = one_turn(chat)
        second = fake.requests[-1].body["messages"]
    assert event_types(events) == ["search", "delta", "done"]
    assert events[0]["query"] == "Warszawa"
    assert second[-2]["tool_calls"][0]["id"] == "call_ol0"
    assert second[-1] == {**second[-1], "role": "tool", "tool_call_id": "call_ol0"}
    assert done(events)["usage"]["requests"] == 2


def test_ollama_done_reason_length_marks_the_answer_cut(searxng, tmp_path):
    with served(searxng, tmp_path, routes=ollama_routes(OLLAMA_MODEL, loaded=32768)) as (
        fake,
        chat,
    ):
        fake.script(ollama_stream(OLLAMA_MODEL, ["Warsaw is"], done_reason="length"))
        events = one_turn(chat)
    assert done(events)["truncated"] is True


def test_ollama_refusing_tools_is_answered_without_them(searxng, tmp_path):
    with served(searxng, tmp_path, routes=ollama_routes(OLLAMA_MODEL, loaded=32768)) as (
        fake,
        chat,
    ):
        fake.script(
            ollama_tools_unsupported(OLLAMA_MODEL),
            *search_steps(),
            ollama_stream(OLLAMA_MODEL, ["Hi."]),
        )
        events = one_turn(chat)
        retried = fake.requests[-1].body
    assert unsearched(event_types(events)) == ["warning", "delta", "done"]
    assert "rejected the web tools" in events[0]["message"]
    assert "tools" not in retried


@pytest.mark.parametrize(
    ("served_with", "window"),
    [
        # Not loaded, no num_ctx: Ollama's own default, which it does not report.
        ({}, 4096),
        ({"version": "0.6.2"}, 2048),  # the default before Ollama 0.6.7
        ({"num_ctx": 16384}, 16384),  # PARAMETER num_ctx in the Modelfile
        ({"loaded": 65536}, 65536),  # /api/ps: what OLLAMA_CONTEXT_LENGTH gave it
    ],
)
def test_ollama_window_caps_the_budget(searxng, tmp_path, served_with, window):
    routes = ollama_routes(OLLAMA_MODEL, **served_with)
    with served(searxng, tmp_path, routes=routes) as (fake, chat):
        fake.script(ollama_stream(OLLAMA_MODEL, ["Warsaw."]))
        budget = done(one_turn(chat))["budget"]
    assert budget["window"] == window
    assert budget["limit"] == window  # below the default budget of 102400


def test_an_assumed_ollama_window_is_read_again_once_the_model_is_loaded(searxng, tmp_path):
    with served(searxng, tmp_path, routes=ollama_routes(OLLAMA_MODEL)) as (fake, chat):
        fake.script(ollama_stream(OLLAMA_MODEL, ["One."]), ollama_stream(OLLAMA_MODEL, ["Two."]))
        conversation_id, first = converse(chat, "Hi")
        # The first request loaded the model with OLLAMA_CONTEXT_LENGTH=32768.
        loaded = ollama_routes(OLLAMA_MODEL, loaded=32768)
        fake.routes["GET", "/api/ps"] = loaded["GET", "/api/ps"]
        second = send(chat, conversation_id, "Again")
    assert done(first)["budget"]["window"] == 4096
    assert done(second)["budget"]["window"] == 32768
    assert done(second)["budget"]["window_note"] is None  # no longer Ollama's default


def test_the_context_bar_is_told_when_ollama_runs_its_default_window(searxng, tmp_path):
    with served(searxng, tmp_path, routes=ollama_routes(OLLAMA_MODEL)) as (fake, chat):
        fake.script(ollama_stream(OLLAMA_MODEL, ["Warsaw."]))
        conversation_id, events = converse(chat, "What is the capital of Poland?")
        stored = get_conversation(chat, conversation_id)["budget"]
    note = done(events)["budget"].get("window_note") or ""
    assert "4096" in note and "OLLAMA_CONTEXT_LENGTH" in note and "num_ctx" in note
    assert stored["window_note"] == note  # a reopened conversation shows it too


# -- vLLM ------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_vllm_reasoning_is_thinking_under_either_name(chat, llm, field):
    llm.script(
        vllm_stream(
            "fake-model", ["42."], reasoning=["Six ", "times seven."], reasoning_field=field
        )
    )
    conversation_id, events = converse(chat, "Six times seven?")
    assert event_types(events) == ["reasoning", "delta", "done"]
    assert text_of(events, "reasoning") == "Six times seven."
    stored = get_conversation(chat, conversation_id)["messages"][-1]
    assert (stored["reasoning"], stored["content"]) == ("Six times seven.", "42.")


def test_vllm_tool_call_arguments_in_many_fragments(chat, llm, brave):
    pieces = ['{"qu', 'ery": "rust ', "async", '"}']
    llm.script(
        vllm_stream("fake-model", [], tool_calls=[("web_search", pieces)]),
        vllm_stream("fake-model", ["Rust has async."]),
    )
    events = one_turn(chat, "Rust async?")
    assert event_types(events) == ["search", "delta", "done"]
    assert events[0]["query"] == "rust async"


def test_vllm_running_usage_in_every_chunk_is_counted_once(chat, llm):
    """continuous_usage_stats (or a gateway forcing it): each chunk has the totals so far."""
    llm.script(
        vllm_stream(
            "fake-model",
            ["a", "b", "c", "d"],
            prompt_tokens=1500,
            cached_tokens=1024,
            continuous=True,
        )
    )
    end = done(one_turn(chat))
    assert end["usage"]["prompt_tokens"] == 1500
    assert end["usage"]["completion_tokens"] == 4  # the last running total, not their sum
    assert end["usage"]["cached_tokens"] == 1024
    assert end["usage"]["requests"] == 1
    assert end["totals"]["prompt_tokens"] == 1500 and end["totals"]["cached_tokens"] == 1024


@pytest.mark.parametrize(
    "error",
    [
        vllm_error(400, "Sampled token IDs exceed the max model length.", "BadRequestError"),
        vllm_old_stream_error("Sampled token IDs exceed the max model length."),
    ],
)
def test_vllm_error_event_in_the_stream_fails_the_turn_keeping_the_text(chat, llm, error):
    llm.script(vllm_stream_failing("fake-model", ["Partial ", "answer"], error))
    conversation_id, events = converse(chat, "Tell me")
    assert failure(events)["kind"] == "upstream"
    assert "max model length" in failure(events)["message"]
    stored = get_conversation(chat, conversation_id)["messages"][-1]
    assert stored["content"] == "Partial answer" and stored["status"] == "error"


def test_vllm_without_a_tool_parser_is_answered_without_tools(chat, llm):
    llm.script(vllm_tools_unsupported(), *search_steps(), vllm_stream("fake-model", ["Hello."]))
    events = one_turn(chat, "Hi")
    assert unsearched(event_types(events)) == ["warning", "delta", "done"]
    assert "tools" not in llm.requests[-1].body


# -- llama.cpp -------------------------------------------------------------------------------

GARBAGE = ["You may call ", "these tools ", "by answering ", "with "]


def search_steps() -> list[Reply]:
    """A model without tool calling searches first: its query, and no page to read."""
    return [Reply(text='{"query": "hi"}'), Reply(text='{"read": 0}')]


def unsearched(types: list[str]) -> list[str]:
    """The event types but the search made first (and its wait for the plan's rate)."""
    return [t for t in types if t not in ("search", "search_wait")]


def test_llamacpp_output_that_does_not_parse_is_discarded_and_answered_without_tools(chat, llm):
    llm.script(
        llamacpp_stream_unparsed("fake-model", GARBAGE), *search_steps(), Reply(text="Warsaw.")
    )
    conversation_id, events = converse(chat, "What is the capital of Poland?")
    first, retried = llm.requests[-4].body, llm.requests[-1].body
    assert unsearched(event_types(events)) == ["delta", "retry", "warning", "delta", "done"]
    retry = next(e for e in events if e["type"] == "retry")
    assert retry == {"type": "retry", "text": "", "reasoning": ""}  # nothing of it is kept
    warning = next(e for e in events if e["type"] == "warning")["message"]
    assert "did not parse" in warning and "the service searches for it instead" in warning
    assert "tools" in first and "tools" not in retried
    stored = get_conversation(chat, conversation_id)["messages"][-1]
    assert (stored["content"], stored["status"]) == ("Warsaw.", "complete")
    assert stored["warnings"] == [warning]


@pytest.mark.socket  # Stop is the hang-up
def test_a_discarded_attempt_leaves_no_checkpoint_behind(chat, llm):
    """Its text was checkpointed while it streamed; Stop once the retry is announced, before
    any new text, must not leave that text stored as the interrupted answer."""
    llm.script(llamacpp_stream_unparsed("fake-model", GARBAGE, delay=0.25), Reply(stall_after=0))
    conversation_id = new_conversation(chat)
    checkpointed: list[str] = []

    def stop(events: Events) -> bool:
        if sum(e["type"] == "delta" for e in events) == len(GARBAGE) and not checkpointed:
            answer = get_conversation(chat, conversation_id)["messages"][-1]
            checkpointed.append(answer["content"] if answer["role"] == "assistant" else "")
        return events[-1]["type"] == "warning"

    events = stream(
        chat, f"/api/conversations/{conversation_id}/chat", {"message": "Capital?"}, stop=stop
    )
    assert events[-2]["type"] == "retry"
    assert checkpointed and checkpointed[0].startswith("You may call")  # it had been saved
    messages = get_conversation(chat, conversation_id)["messages"]
    assert [m["role"] for m in messages] == ["user"]


# -- LM Studio -------------------------------------------------------------------------------


def test_lmstudio_ignoring_stream_options_leaves_the_turn_unreported(searxng, tmp_path):
    model = "gemma-3-270m-it-qat"
    with served(searxng, tmp_path, model, routes=lmstudio_routes(model, loaded=4096)) as (
        fake,
        chat,
    ):
        fake.script(lmstudio_stream(model, ["Hel", "lo."], reasoning=["Greet", " back."]))
        conversation_id, events = converse(chat, "Hi")
        conversation = get_conversation(chat, conversation_id)
    assert event_types(events) == ["reasoning", "delta", "done"]
    assert text_of(events) == "Hello."
    end = done(events)
    assert end["usage"]["reported"] is False
    assert end["totals"]["turns_unreported"] == 1 and end["totals"]["prompt_tokens"] == 0
    assert end["budget"]["window"] == 4096  # the loaded instance's context_length
    # Nothing measured: the next turn is projected from the estimate, not from zero.
    assert not conversation.get("usage", {}).get("last_prompt_tokens")


def test_lmstudio_context_overflow_is_classified():
    error = lmstudio_context_overflow().error
    assert classify(400, error, {}).kind == "context_overflow"
    n_keep = {"error": "Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"}
    assert classify(400, n_keep, {}).kind == "context_overflow"


# -- hosted gateways -------------------------------------------------------------------------


def test_openrouter_cost_and_cached_tokens_add_up_in_the_totals(chat, llm):
    usage = {
        "prompt_tokens": 1940,
        "completion_tokens": 12,
        "total_tokens": 1952,
        "cost": 0.0042,
        "cost_details": {"upstream_inference_cost": None},
        "prompt_tokens_details": {"cached_tokens": 1536, "cache_write_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 4},
    }
    model = "deepseek/deepseek-r1"
    llm.script(
        openrouter_stream(model, ["Par", "is."], reasoning=["France..."], usage=usage),
        openrouter_stream(model, ["Yes."], usage={**usage, "cost": 0.0008}),
    )
    conversation_id, first = converse(chat, "Capital of France?")
    second = send(chat, conversation_id, "Sure?")
    assert event_types(first) == ["reasoning", "delta", "done"]  # the comments are not events
    assert text_of(first) == "Paris."
    totals = done(second)["totals"]
    assert totals["cost"] == pytest.approx(0.005)
    assert totals["requests_with_cost"] == 2 and totals["requests_unreported_cost"] == 0
    assert totals["cached_tokens"] == 2 * 1536
    assert totals["prompt_tokens"] == 2 * 1940  # cached tokens are part of prompt_tokens


@pytest.mark.parametrize("message", ["Provider returned error: connection reset", None])
def test_openrouter_error_mid_stream_keeps_the_text_and_fails_as_upstream(chat, llm, message):
    llm.script(openrouter_stream_failing("deepseek/deepseek-r1", ["Paris ", "is"], message))
    conversation_id, events = converse(chat, "Capital of France?")
    assert (failure(events)["kind"], failure(events)["recovery"]) == ("upstream", "retry")
    assert (message or "with an error") in failure(events)["message"]
    assert get_conversation(chat, conversation_id)["messages"][-1]["content"] == "Paris is"


@pytest.mark.parametrize(
    ("usage", "prompt", "cached"),
    [
        # LiteLLM's proxy: OpenAI counts plus Anthropic's cache fields, cache included.
        (
            {
                "prompt_tokens": 2100,
                "completion_tokens": 40,
                "total_tokens": 2140,
                "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 0,
                "prompt_tokens_details": {"cached_tokens": 2000},
            },
            2100,
            2000,
        ),
        # Anthropic's own counts passed through: input_tokens leaves the cache out.
        (
            {
                "input_tokens": 100,
                "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 50,
                "output_tokens": 40,
            },
            2150,
            2000,
        ),
    ],
)
def test_gateway_cache_fields_are_counted_once(chat, llm, usage, prompt, cached):
    llm.script(openai_style_stream("claude-sonnet", ["Hi."], usage))
    end = done(one_turn(chat, "Hi"))
    assert (end["usage"]["prompt_tokens"], end["usage"]["cached_tokens"]) == (prompt, cached)
    assert end["usage"]["completion_tokens"] == 40
    assert end["budget"]["used"] == prompt  # what the next turn's projection builds on


# -- a tool call written as text -------------------------------------------------------------


@pytest.mark.parametrize(
    "written",
    [
        '{"name": "web_search", "parameters": {"query": "Warszawa"}}',  # Llama 3.x
        '<tool_call>\n{"name": "web_search", "arguments": {"query": "Warszawa"}}\n</tool_call>',
        '[TOOL_CALLS][{"name": "web_search", "arguments": {"query": "Warszawa"}}]',  # Mistral
        '```json\n{"name": "web_search", "arguments": {"query": "Warszawa"}}\n```',
    ],
)
def test_a_tool_call_written_as_text_is_run_and_never_shown(chat, llm, brave, written):
    llm.script(text_tool_call("fake-model", written), Reply(text="Warsaw."))
    conversation_id, events = converse(chat, "Capital of Poland?")
    assert event_types(events) == ["search", "delta", "done"]
    assert events[0]["query"] == "Warszawa"
    assert text_of(events) == "Warsaw."
    assert get_conversation(chat, conversation_id)["messages"][-1]["content"] == "Warsaw."


def test_json_text_naming_no_declared_tool_is_the_answer(chat, llm):
    written = '{"name": "get_weather", "arguments": {"city": "Warsaw"}}'
    llm.script(text_tool_call("fake-model", written))
    events = one_turn(chat, "Weather?")
    assert event_types(events) == ["delta", "done"]
    assert text_of(events) == written


@pytest.mark.parametrize(
    "answer",
    ["[1] Warsaw is the capital.", "{} is an empty object.", "<think>hm</think>Warsaw.", "Warsaw"],
)
def test_prose_is_never_held_back(answer):
    held = [answer[:n] for n in range(1, len(answer) + 1) if could_be_call(answer[:n])]
    assert len(held) <= len("<tool_call>")  # at most a few characters, never the answer
    assert parse_text_calls(answer, SEARCH_TOOLS) == []


def test_several_calls_written_as_text():
    written = (
        '{"name": "web_search", "parameters": {"query": "a"}}; '
        '{"name": "web_fetch", "parameters": {"url": "https://a.org"}}'
    )
    calls = parse_text_calls(written, SEARCH_TOOLS)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("web_search", {"query": "a"}),
        ("web_fetch", {"url": "https://a.org"}),
    ]
    assert len({c.id for c in calls}) == 2


# -- MODEL_PARAMS ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["model", "messages", "tools", "stream", "stream_options"])
def test_model_params_cannot_replace_what_the_service_sends(key):
    raw = json.dumps({"fake-model": {"temperature": 0.2, key: "x"}})
    with pytest.raises(config.ConfigError) as refused:
        config.model_params(raw)
    assert f"'{key}'" in str(refused.value) and "'fake-model'" in str(refused.value)


def test_model_params_may_set_sampling():
    raw = json.dumps({"fake-model": {"temperature": 0.2, "top_k": 20, "max_tokens": 512}})
    assert config.model_params(raw) == {
        "fake-model": {"temperature": 0.2, "top_k": 20, "max_tokens": 512}
    }
