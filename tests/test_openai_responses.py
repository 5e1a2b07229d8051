"""POST /v1/responses, the OpenAI Responses API over the same answer as
/v1/chat/completions, through the clients that call it: the official `openai` SDK
(`responses.create` and `.stream`), the OpenAI Agents SDK's default Agent and Runner, and
pydantic-ai's OpenAIResponsesModel. The fake model server, a real SearXNG on the fake
Brave, and the loopback page server."""

from __future__ import annotations

import json
import re

import openai
import pytest
from openai.types.responses import Response

from tests.fakes.llm_server import Reply, ToolCall
from tests.openai_clients import client_of, search_then_fetch, weather_by_the_client_s_tool

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}


def tool_names(recorded) -> list[str]:
    return [tool["function"]["name"] for tool in recorded.body.get("tools", [])]


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
    assert response.usage.input_tokens_details.cached_tokens == 540
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


def test_stream_tells_each_item_in_order_with_rising_sequence_numbers(chat, llm, brave, pages):
    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    with client_of(chat).responses.stream(
        model="fake-model", input=f"How does asyncio work? {article}"
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    numbers = [event.sequence_number for event in events]
    assert numbers == list(range(len(events)))
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    searches = [i for i, kind in enumerate(kinds) if kind == "response.web_search_call.completed"]
    first_text = kinds.index("response.output_text.delta")
    assert len(searches) == 2 and searches[-1] < first_text
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    done = [e.item.type for e in events if e.type == "response.output_item.done"]
    assert added == done == ["web_search_call", "web_search_call", "message"]
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    annotated = [e.annotation for e in events if e.type == "response.output_text.annotation.added"]
    assert annotated and annotated[0].url == article
    assert kinds.index("response.output_text.annotation.added") < kinds.index(
        "response.output_text.done"
    )
    check_searched_and_cited(final, article)
    assert final.output_text == streamed


def test_a_client_function_tool_is_passed_through_and_continued(chat, llm, brave):
    weather_by_the_client_s_tool(llm)
    client = client_of(chat)
    asked = [{"role": "user", "content": "Weather in Kraków?"}]
    first = client.responses.create(model="fake-model", input=asked, tools=[WEATHER])
    assert [item.type for item in first.output] == ["web_search_call", "function_call"]
    call = first.output[-1]
    assert call.name == "get_weather" and call.call_id == "call_w"
    assert json.loads(call.arguments) == {"city": "Kraków"}
    assert tool_names(llm.requests[0]) == ["get_weather", "web_search", "web_fetch"]
    assert llm.requests[0].body["tools"][0]["function"]["description"] == "The weather in a city"
    assert len(brave.requests) == 1  # ours ran here

    # As a client continues: the output items given back, and the function's output.
    given_back = [item.model_dump(exclude_none=True) for item in first.output]
    ran = {"type": "function_call_output", "call_id": "call_w", "output": "sunny, 21 °C"}
    second = client.responses.create(
        model="fake-model", input=[*asked, *given_back, ran], tools=[WEATHER]
    )
    assert second.output_text == "It is sunny in Kraków."
    assert llm.requests[-1].body["messages"][-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": call.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21 °C"},
    ]


def test_web_search_false_offers_no_tools(chat, llm):
    llm.script(Reply(text="Without tools."))
    response = client_of(chat).responses.create(
        model="fake-model", input="q", extra_body={"web_search": False}
    )
    assert response.output_text == "Without tools."
    assert [item.type for item in response.output] == ["message"]
    assert "tools" not in llm.requests[-1].body
    assert "Today is" in llm.requests[-1].body["messages"][0]["content"]


def test_openai_s_web_search_tool_is_accepted_and_changes_nothing(chat, llm, brave):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "news"})]),
        Reply(text="Here is the news."),
    )
    response = client_of(chat).responses.create(
        model="fake-model",
        input="What is new?",
        tools=[{"type": "web_search", "user_location": {"type": "approximate", "country": "DE"}}],
    )
    assert [item.type for item in response.output] == ["web_search_call", "message"]
    assert tool_names(llm.requests[0]) == ["web_search", "web_fetch"]
    assert brave.requests[-1].params["country"] == "DE"


def test_previous_response_id_is_refused_naming_it(chat, llm):
    with pytest.raises(openai.BadRequestError) as refused:
        client_of(chat).responses.create(
            model="fake-model", input="and then?", previous_response_id="resp_123"
        )
    error = refused.value.body
    assert error["param"] == "previous_response_id" and error["type"] == "invalid_request_error"
    assert "stores no responses" in error["message"]
    assert llm.requests == []


@pytest.mark.socket  # the Agents SDK is an async client with connections of its own
def test_the_agents_sdk_default_agent_runs_its_function_tool(chat, llm, brave):
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.models.openai_provider import OpenAIProvider

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}, 21 °C"

    weather_by_the_client_s_tool(llm)
    client = openai.AsyncOpenAI(base_url=f"{chat.url}/v1", api_key="unused", max_retries=0)
    agent = Agent(name="Assistant", instructions="Answer briefly.", tools=[get_weather])
    run = RunConfig(
        model="fake-model",
        model_provider=OpenAIProvider(openai_client=client),  # its default: the Responses API
        tracing_disabled=True,
    )
    result = Runner.run_sync(agent, "Weather in Kraków?", run_config=run)
    assert result.final_output == "It is sunny in Kraków."
    assert [r.path for r in llm.requests] == ["/v1/chat/completions"] * 3
    assert tool_names(llm.requests[0]) == ["get_weather", "web_search", "web_fetch"]
    assert len(brave.requests) == 1
    # Its second request gave back our web_search_call and its own call with the output.
    assert llm.requests[2].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_w",
        "content": "sunny in Kraków, 21 °C",
    }
    assert result.context_wrapper.usage.requests == 2


@pytest.mark.socket  # pydantic-ai is an async client with connections of its own
def test_pydantic_ai_s_responses_model_answers_with_its_tool(chat, llm, brave):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    weather_by_the_client_s_tool(llm)
    provider = OpenAIProvider(base_url=f"{chat.url}/v1", api_key="unused")
    agent = Agent(OpenAIResponsesModel("fake-model", provider=provider), instructions="Be brief.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}, 21 °C"

    result = agent.run_sync("Weather in Kraków?")
    assert result.output == "It is sunny in Kraków."
    assert tool_names(llm.requests[0]) == ["get_weather", "web_search", "web_fetch"]
    assert llm.requests[2].body["messages"][-1]["content"] == "sunny in Kraków, 21 °C"
    assert len(brave.requests) == 1


def test_a_failure_mid_stream_is_an_error_event_then_response_failed(chat, llm):
    llm.script(Reply(text="The start of an answer that breaks.", break_after=2))
    with client_of(chat).responses.stream(model="fake-model", input="q") as stream:
        events = list(stream)
    kinds = [event.type for event in events]
    assert "response.output_text.delta" in kinds
    assert kinds[-2:] == ["error", "response.failed"]
    assert "the model server failed" in events[-2].message
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.code == "server_error"


def test_an_unknown_model_and_an_unusable_item_are_openai_errors_naming_them(chat, llm):
    client = client_of(chat)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.responses.create(model="no-such-model", input="q")
    assert unknown.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(
            model="fake-model", input=[{"type": "item_reference", "id": "msg_1"}]
        )
    assert refused.value.body["param"].startswith("input")
    assert llm.requests == []
