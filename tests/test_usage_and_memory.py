"""Budget arithmetic, usage normalisation, compression output and memory dedupe."""

from __future__ import annotations

import pytest

from app.chat import context
from app.model.client import chunk_events
from app.model.failures import classify
from app.model.tool_calls import ToolCallAssembler
from app.model.usage import normalize_usage


def test_usage_with_openai_style_cached_tokens():
    usage = normalize_usage(
        {
            "prompt_tokens": 1200,
            "completion_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 1000},
        }
    )
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cost) == (1200, 1000, None)


def test_usage_with_anthropic_style_cache_reads_counted_apart_are_added():
    # prompt_tokens smaller than the cached count cannot be the whole prompt.
    usage = normalize_usage(
        {"prompt_tokens": 50, "completion_tokens": 5, "cache_read_input_tokens": 3000}
    )
    assert usage.prompt_tokens == 3050
    assert usage.cached_tokens == 3000


def test_usage_without_cache_fields_and_with_a_cost():
    usage = normalize_usage({"prompt_tokens": 10, "completion_tokens": 2, "cost": 0.0012})
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cost) == (10, 0, 0.0012)


def test_local_estimate_is_a_floor_and_missing_usage_is_none():
    assert (
        normalize_usage(
            {"prompt_tokens": 3, "completion_tokens": 1}, floor_prompt_tokens=40
        ).prompt_tokens
        == 40
    )
    assert normalize_usage(None) is None


def test_served_window_caps_the_budget():
    assert context.effective_budget(102_400, 8_192) == 8_192
    assert context.effective_budget(4_000, 8_192) == 4_000
    assert context.effective_budget(102_400, None) == 102_400


def test_projection_adds_measured_estimate_and_reserve():
    projected = context.projected_tokens(1000, "x" * 300, 500)
    assert projected >= 1000 + 100 + 500


def test_estimate_rounds_up_and_counts_bytes():
    assert context.estimate_tokens("abcd") == 2
    assert context.estimate_tokens("żółć") > context.estimate_tokens("zolc")
    assert context.estimate_tokens("") == 0


def test_estimate_counts_each_ascii_digit_and_punctuation_mark_as_a_token():
    # Gemma's, Llama's and Qwen's tokenizers split numbers into single digits.
    assert context.estimate_tokens("2024-01-15") == 10
    assert context.estimate_tokens("$1,234.50") == 9
    # Only the rest goes by bytes: "Room " and " floor" are 11 bytes, 4 tokens.
    assert context.estimate_tokens("Room 101, floor") == 4 + 3 + 1
    # A digit of another script is not ASCII: it goes by its bytes (٣ is 2 bytes).
    assert context.estimate_tokens("٣٣٣") == 2


def test_tool_calls_assembled_from_fragments_by_index():
    assembler = ToolCallAssembler()
    for chunk in [
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "a",
                                "type": "function",
                                "function": {"name": "web_search", "arguments": ""},
                            }
                        ]
                    }
                }
            ]
        },
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 1,
                                "id": "b",
                                "function": {"name": "web_fetch", "arguments": '{"url": '},
                            }
                        ]
                    }
                }
            ]
        },
        {
            "choices": [
                {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"query"'}}]}}
            ]
        },
        {
            "choices": [
                {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ': "x"}'}}]}}
            ]
        },
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [{"index": 1, "function": {"arguments": '"https://a.org"}'}}]
                    }
                }
            ]
        },
    ]:
        chunk_events(chunk, assembler)
    calls = assembler.result()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "web_search", '{"query": "x"}'),
        ("b", "web_fetch", '{"url": "https://a.org"}'),
    ]


def test_reasoning_arrives_under_either_name():
    for field in ("reasoning_content", "reasoning"):
        events = chunk_events({"choices": [{"delta": {field: "hmm"}}]}, ToolCallAssembler())
        assert [(e.type, e.text) for e in events] == [("reasoning", "hmm")]


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (401, {"error": {"message": "Incorrect API key"}}, "auth"),
        (429, {"error": {"message": "slow down"}}, "rate_limit"),
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens",
                    "code": "context_length_exceeded",
                }
            },
            "context_overflow",
        ),
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                }
            },
            "context_overflow",
        ),
        (
            400,
            {"error": {"message": "blocked", "code": "content_policy_violation"}},
            "content_filter",
        ),
        (
            400,
            {"error": {"message": "registry.ollama.ai/library/gemma does not support tools"}},
            "tools_unsupported",
        ),
        (500, {"error": {"message": "boom"}}, "upstream"),
    ],
)
def test_errors_are_classified(status, body, kind):
    assert classify(status, body, {"retry-after": "3"}).kind == kind


def test_retry_after_is_read():
    assert classify(429, {}, {"retry-after": "7"}).retry_after == 7.0


def test_compression_output_parsed_even_inside_a_code_fence():
    parsed = context.parse_compression(
        '```json\n{"summary": "We discussed X.", "facts": ["Prefers Python"]}\n```'
    )
    assert parsed.summary == "We discussed X." and parsed.facts == ["Prefers Python"]
    with pytest.raises(ValueError):
        context.parse_compression("no json here")


def test_memory_skips_exact_and_near_duplicates():
    memory, added = context.merge_facts(
        "", ["User prefers Python over Node.js", "Timezone is UTC+8"]
    )
    assert added == ["User prefers Python over Node.js", "Timezone is UTC+8"]
    memory, added = context.merge_facts(
        memory, ["The user prefers Python over Node.js.", "timezone is utc+8", "Uses Debian 12"]
    )
    assert added == ["Uses Debian 12"]
    assert memory.splitlines() == [
        "- User prefers Python over Node.js",
        "- Timezone is UTC+8",
        "- Uses Debian 12",
    ]


def test_compression_prompt_must_contain_transcript():
    with pytest.raises(context.PromptError):
        context.check_compress_prompt("Summarise the chat.")
    request = context.compression_request(
        'Keep {"json": true}. {transcript}', "", "", [{"role": "user", "content": "hello"}]
    )
    assert request[0]["content"] == 'Keep {"json": true}. USER: hello' + context.WEB_DATA_RULE


def test_today_line_is_day_granular():
    from datetime import date

    line = context.today_line(date(2026, 11, 29))
    assert line.startswith("Today is 2026-11-29 (Sunday).")
    assert "year" in line


def test_llama_cpp_unparsed_tool_output_means_tools_unsupported():
    body = {
        "error": {
            "code": 500,
            "message": "The model produced output that does not match the expected "
            "peg-native format",
            "type": "server_error",
        }
    }
    assert classify(500, body, {}).kind == "tools_unsupported"
