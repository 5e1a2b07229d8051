"""Compression and memory with a small budget: the rolling summary, facts in memory.md
without duplicates, the failure path, and a context overflow compressed and retried."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.chat_client import get_conversation, send
from tests.conftest import ChatService, chat_env
from tests.fakes.llm_server import Reply, context_length_exceeded, server_error
from tests.test_chat import new_conversation

MEASURED = {"prompt_tokens": 900, "completion_tokens": 10}


@pytest.fixture
def small_chat(llm, searxng, tmp_path) -> Iterator[ChatService]:
    """Keeps the last 2 messages verbatim; conversations get a 1,000-token budget."""
    llm.clear()
    env = chat_env(llm, tmp_path, KEEP_RECENT_MESSAGES="2", MAX_COMPLETION_TOKENS="200")
    service = ChatService(env, searxng.url).start()
    yield service
    service.stop()


def summary_reply(summary: str, facts: list[str]) -> Reply:
    return Reply(
        text=json.dumps({"summary": summary, "facts": facts}),
        usage={"prompt_tokens": 300, "completion_tokens": 40},
    )


def small_conversation(chat) -> str:
    return new_conversation(chat, context_budget=1000, web_search=False, web_fetch=False)


def test_over_budget_folds_old_turns_into_summary_and_facts_into_memory(small_chat, llm):
    conversation_id = small_conversation(small_chat)
    llm.script(Reply(text="Python is a fine choice.", usage=MEASURED))
    send(small_chat, conversation_id, "I prefer Python over Node.js for scripts.")

    llm.script(
        summary_reply("The user likes Python for scripting.", ["User prefers Python over Node.js"]),
        Reply(text="Second answer.", usage=MEASURED),
    )
    events = send(small_chat, conversation_id, "What about packaging?")
    compression = next(e for e in events if e["type"] == "compression")
    assert compression["messages"] == 1
    assert compression["facts_added"] == ["User prefers Python over Node.js"]

    summary_request = llm.requests[1].body
    assert summary_request["model"] == "fake-small"  # SUMMARY_MODEL
    assert summary_request.get("stream") is False
    assert "I prefer Python over Node.js" in summary_request["messages"][0]["content"]
    answer_request = llm.requests[2].body["messages"]
    assert "The user likes Python for scripting." in answer_request[0]["content"]
    assert "User prefers Python over Node.js" in answer_request[0]["content"]  # memory layer
    assert all("I prefer Python" not in m["content"] for m in answer_request[1:])

    stored = get_conversation(small_chat, conversation_id)
    assert stored["summary"] == "The user likes Python for scripting."
    assert stored["summarized"] == 1
    # The conversation's log keeps everything for the reader; only the model sees less.
    assert len(stored["messages"]) == 4
    memory = (small_chat.settings.data_dir / "memory.md").read_text()
    assert memory == "- User prefers Python over Node.js\n"
    # The summary call's tokens are counted in the conversation's totals.
    assert stored["totals"]["prompt_tokens"] >= 900 + 300 + 900

    llm.script(
        summary_reply(
            "The user likes Python; asked about packaging.",
            ["The user prefers Python over Node.js.", "Timezone is UTC+8"],
        ),
        Reply(text="Third answer.", usage=MEASURED),
    )
    send(small_chat, conversation_id, "And testing?")
    second_summary = llm.requests[3].body["messages"][0]["content"]
    assert "The user likes Python for scripting." in second_summary  # absorbs the previous one
    memory = (small_chat.settings.data_dir / "memory.md").read_text()
    assert memory.splitlines() == ["- User prefers Python over Node.js", "- Timezone is UTC+8"]
    stored = get_conversation(small_chat, conversation_id)
    assert stored["summary"] == "The user likes Python; asked about packaging."
    assert stored["summarized"] == 3


def test_failed_compression_drops_oldest_turns_says_which_and_still_answers(small_chat, llm):
    conversation_id = small_conversation(small_chat)
    llm.script(Reply(text="First answer.", usage=MEASURED))
    send(small_chat, conversation_id, "An early question about gardening")

    llm.script(server_error(500), Reply(text="Still answering.", usage=MEASURED))
    events = send(small_chat, conversation_id, "A later question")
    warning = next(e for e in events if e["type"] == "warning")
    assert "dropped the 1 oldest messages" in warning["message"]
    assert "An early question about gardening" in warning["message"]
    assert events[-1]["type"] == "done"
    assert "".join(e["text"] for e in events if e["type"] == "delta") == "Still answering."
    stored = get_conversation(small_chat, conversation_id)
    assert stored["summarized"] == 1 and stored["summary"] == ""
    assert all("gardening" not in m["content"] for m in llm.requests[-1].body["messages"][1:])


def test_summary_that_is_not_json_takes_the_failure_path(small_chat, llm):
    conversation_id = small_conversation(small_chat)
    llm.script(Reply(text="First answer.", usage=MEASURED))
    send(small_chat, conversation_id, "first")
    llm.script(Reply(text="Sure! Here is a summary."), Reply(text="Answer.", usage=MEASURED))
    events = send(small_chat, conversation_id, "second")
    assert any(e["type"] == "warning" and "compression failed" in e["message"] for e in events)
    assert events[-1]["type"] == "done"


def test_context_overflow_is_compressed_and_retried_once(small_chat, llm):
    conversation_id = small_conversation(small_chat)
    # A budget the projection never crosses: only the server's refusal triggers compression.
    roomy = {"settings": {"context_budget": 1_000_000}}
    httpx.patch(f"{small_chat.url}/api/conversations/{conversation_id}", json=roomy)
    llm.script(Reply(text="First answer.", usage={"prompt_tokens": 10, "completion_tokens": 2}))
    send(small_chat, conversation_id, "first question")

    llm.script(
        context_length_exceeded(),
        summary_reply("Earlier: a first question.", []),
        Reply(text="Answer after compression."),
    )
    events = send(small_chat, conversation_id, "second question")
    assert [e["type"] for e in events if e["type"] != "delta"] == ["compression", "done"]
    assert get_conversation(small_chat, conversation_id)["summary"] == "Earlier: a first question."

    llm.script(
        context_length_exceeded(),
        summary_reply("Still too long.", []),
        context_length_exceeded(),
    )
    events = send(small_chat, conversation_id, "third question")
    assert events[-1]["type"] == "error" and events[-1]["kind"] == "context_overflow"
    assert events[-1]["restore"] == "third question"
