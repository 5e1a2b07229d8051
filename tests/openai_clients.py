"""The official `openai` SDK on a test's service (tests/test_openai_v1.py,
tests/test_openai_responses.py)."""

from __future__ import annotations

import openai


def client_of(chat, api_key: str = "unused", **options) -> openai.OpenAI:
    """The SDK on the service's transport, in-process or on its socket."""
    return openai.OpenAI(
        base_url=f"{chat.url}/v1",
        api_key=api_key,
        max_retries=0,
        http_client=chat.client(),
        **options,
    )
