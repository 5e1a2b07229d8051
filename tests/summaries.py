"""A compression as the fake model server answers it: a summary and facts, as JSON; and a
conversation small enough (1,000 tokens, no tools) that a few turns need one."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.chat_client import new_conversation
from tests.conftest import ChatService, chat_env, service_for
from tests.fakes.llm_server import Reply

MEASURED = {"prompt_tokens": 900, "completion_tokens": 10}
SMALL_CHAT = {"KEEP_RECENT_MESSAGES": "2", "MAX_COMPLETION_TOKENS": "200"}
"""The settings of a service that keeps the last 2 messages verbatim: with a
small_conversation, a few turns need a compression."""


@pytest.fixture
def small_chat_on_backend(request, llm, searxng, tmp_path, database_url) -> Iterator[ChatService]:
    """A service of SMALL_CHAT on each storage backend (conftest's `database_url`)."""
    llm.clear()
    env = chat_env(llm, tmp_path, **SMALL_CHAT, DATABASE_URL=database_url)
    with service_for(request, env, searxng.url) as service:
        yield service


def summary_reply(summary: str, facts: list[str]) -> Reply:
    return Reply(
        text=json.dumps({"summary": summary, "facts": facts}),
        usage={"prompt_tokens": 300, "completion_tokens": 40},
    )


def small_conversation(chat) -> str:
    return new_conversation(chat, context_budget=1000, web_search=False, web_fetch=False)
