"""The official `openai` SDK on a test's service, and the model's search answer that both
/v1 endpoints are asked for (tests/test_openai_v1.py, tests/test_openai_responses.py)."""

from __future__ import annotations

import re

import openai

from tests.fakes.llm_server import Reply, ToolCall


def client_of(chat, api_key: str = "unused", **options) -> openai.OpenAI:
    """The SDK on the service's transport, in-process or on its socket."""
    return openai.OpenAI(
        base_url=f"{chat.url}/v1",
        api_key=api_key,
        max_retries=0,
        http_client=chat.client(),
        **options,
    )


def search_then_fetch(llm, article: str) -> None:
    llm.script(
        Reply(
            tool_calls=[ToolCall("web_search", {"query": "python asyncio"})],
            usage={
                "prompt_tokens": 100,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 40},
            },
        ),
        Reply(
            tool_calls=[ToolCall("web_fetch", {"url": article})],
            usage={"prompt_tokens": 600, "completion_tokens": 6},
        ),
        Reply(reply_to=citing_the_page),
    )


def citing_the_page(body: dict) -> Reply:
    """The model cites the page it read by the number its result gave it ("[n] ...")."""
    number = re.match(r"\[(\d+)\]", body["messages"][-1]["content"]).group(1)
    return Reply(
        text=f"Asyncio runs coroutines on an event loop [{number}].",
        usage={
            "prompt_tokens": 1500,
            "completion_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 500},
        },
    )


def weather_by_the_client_s_tool(llm) -> None:
    """The model searches (ours, run here), then calls the client's get_weather tool
    (`call_w`), then answers from its result."""
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "weather news"})]),
        Reply(tool_calls=[ToolCall("get_weather", {"city": "Kraków"}, id="call_w")]),
        Reply(text="It is sunny in Kraków."),
    )
