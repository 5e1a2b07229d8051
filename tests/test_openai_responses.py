"""POST /v1/responses, the OpenAI Responses API over the same answer as
/v1/chat/completions, through the clients that call it: the official `openai` SDK
(`responses.create` and `.stream`), the OpenAI Agents SDK's default Agent and Runner, and
pydantic-ai's OpenAIResponsesModel. The fake model server, a real SearXNG on the fake
Brave, and the loopback page server."""

from __future__ import annotations

import re

from openai.types.responses import Response

from tests.fakes.llm_server import Reply, ToolCall
from tests.openai_clients import client_of

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}


def tool_names(recorded) -> list[str]:
    return [tool["function"]["name"] for tool in recorded.body.get("tools", [])]


def search_then_fetch(llm, article: str) -> None:
    """The model searches, reads the article, and cites it by the number it was given."""
    llm.script(
        Reply(
            tool_calls=[ToolCall("web_search", {"query": "python asyncio"})],
            usage={"prompt_tokens": 100, "completion_tokens": 5},
        ),
        Reply(
            tool_calls=[ToolCall("web_fetch", {"url": article})],
            usage={"prompt_tokens": 600, "completion_tokens": 6},
        ),
        Reply(reply_to=citing_the_page),
    )


def citing_the_page(body: dict) -> Reply:
    number = re.match(r"\[(\d+)\]", body["messages"][-1]["content"]).group(1)
    return Reply(
        text=f"Asyncio runs coroutines on an event loop [{number}].",
        usage={
            "prompt_tokens": 1500,
            "completion_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 500},
        },
    )


def check_searched_and_cited(response: Response, article: str) -> None:
    """A web_search_call per search and page read, then the message whose text cites the
    page as a url_citation; the usage summed over the answer's requests."""
    searched, opened, message = response.output
    assert searched.type == "web_search_call" and searched.status == "completed"
    assert searched.action.type == "search" and searched.action.query == "python asyncio"
    listed = searched.action.sources
    assert listed and all(s.url.startswith("http") for s in listed)
    assert opened.type == "web_search_call" and opened.action.type == "open_page"
    assert opened.action.url == article and opened.status == "completed"
    assert message.type == "message" and message.role == "assistant"
    (text,) = message.content
    assert text.text.startswith("Asyncio runs coroutines on an event loop [")
    (cited,) = text.annotations
    assert cited.type == "url_citation" and cited.url == article and cited.title
    assert re.fullmatch(r"\[\d+\]", text.text[cited.start_index : cited.end_index])
    assert response.output_text == text.text
    assert response.usage.input_tokens == 2200 and response.usage.output_tokens == 23
    assert response.usage.input_tokens_details.cached_tokens == 500
    assert response.usage.total_tokens == 2223
    assert response.status == "completed"


def test_create_searches_and_cites_as_openai_web_search_reports(chat, llm, brave, pages):
    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    response = client_of(chat).responses.create(
        model="fake-model",
        instructions="Be brief.",
        input=f"How does asyncio work? Start from {article}",
        temperature=0.2,
        max_output_tokens=300,
    )
    # The SDK's own types take the whole object as it came, nothing missing or misnamed.
    Response.model_validate(response.model_dump(mode="json", exclude_unset=True))
    assert response.object == "response" and response.id.startswith("resp_")
    check_searched_and_cited(response, article)
    sent = llm.requests[0].body
    assert sent["messages"][0]["role"] == "system" and "Today is" in sent["messages"][0]["content"]
    assert sent["messages"][1:] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": f"How does asyncio work? Start from {article}"},
    ]
    assert (sent["temperature"], sent["max_tokens"]) == (0.2, 300)
    assert tool_names(llm.requests[0]) == ["web_search", "web_fetch"]
    # Nothing is stored: the history is the client's.
    assert chat.http.get("/api/conversations").json() == []
