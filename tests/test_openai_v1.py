"""/v1 through the official `openai` SDK: the service on loopback with the fake model
server, a real SearXNG on the fake Brave, and the loopback page server."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import openai
import pytest

from app.api.answer_slots import V1_TOTAL_ANSWERS
from app.chat import context
from app.chat.fitting import CUT_MARKER, history_tokens
from tests.chat_client import done, new_conversation, send
from tests.conftest import chat_env, service_for
from tests.fakes.conventions import llamacpp_stream_unparsed
from tests.fakes.llm_server import (
    FakeLLM,
    Reply,
    ToolCall,
    context_length_exceeded,
    server_error,
    tools_unsupported,
)
from tests.openai_clients import client_of, search_then_fetch, weather_by_the_client_s_tool


def tool_names(recorded) -> list[str]:
    return [tool["function"]["name"] for tool in recorded.body.get("tools", [])]


def test_a_plain_answer(chat, llm):
    llm.script(Reply(text="Hello there.", usage={"prompt_tokens": 30, "completion_tokens": 3}))
    client = client_of(chat)
    answer = client.chat.completions.create(
        model="fake-model",
        messages=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        temperature=0.2,
        seed=7,
        max_tokens=50,
    )
    assert answer.object == "chat.completion"
    assert answer.choices[0].message.content == "Hello there."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage.prompt_tokens == 30 and answer.usage.completion_tokens == 3
    sent = llm.requests[-1].body
    # Our date anchor and tool note go first; the client's own instructions follow, as
    # the system message a local server's template knows.
    assert sent["messages"][0]["role"] == "system" and "Today is" in sent["messages"][0]["content"]
    assert sent["messages"][1:] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert (sent["temperature"], sent["seed"], sent["max_tokens"]) == (0.2, 7, 50)
    assert tool_names(llm.requests[-1]) == ["web_search", "web_fetch"]
    # Nothing is stored: the history is the client's.
    assert chat.http.get("/api/conversations").json() == []


def test_a_client_that_caps_nothing_gets_the_services_cap(request, llm, pages, searxng, tmp_path):
    # Without a cap a small model may write until its window is full (7,324 tokens seen
    # from Gemma 3 270M); the page has always sent MAX_COMPLETION_TOKENS.
    env = chat_env(llm, tmp_path, pages, MAX_COMPLETION_TOKENS="300")
    with service_for(request, env, searxng.url) as chat:
        client = client_of(chat)
        for extra in ({}, {"max_completion_tokens": 77}):
            llm.script(Reply(text="Short."))
            client.chat.completions.create(
                model="fake-model", messages=[{"role": "user", "content": "Hi"}], **extra
            )
            sent = llm.requests[-1].body
            capped = ("max_tokens", "max_completion_tokens")
            caps = {key: sent[key] for key in capped if key in sent}
            assert caps == ({"max_tokens": 300} if not extra else extra)


def check_cited(text: str, annotations, article: str) -> None:
    assert len(annotations) == 1
    cited = annotations[0].url_citation
    assert annotations[0].type == "url_citation"
    assert cited.url == article and cited.title
    assert re.fullmatch(r"\[\d+\]", text[cited.start_index : cited.end_index])


def test_a_search_and_fetch_answer_with_citations_and_summed_usage(chat, llm, brave, pages):
    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    answer = client_of(chat).chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": f"How does asyncio work? Start from {article}"}],
        web_search_options={
            "user_location": {"type": "approximate", "approximate": {"country": "DE"}}
        },
    )
    message = answer.choices[0].message
    assert message.content.startswith("Asyncio runs coroutines on an event loop [")
    check_cited(message.content, message.annotations, article)
    assert answer.usage.prompt_tokens == 2200 and answer.usage.completion_tokens == 23
    assert answer.usage.prompt_tokens_details.cached_tokens == 540
    # The searches and reads, as reasoning; the locale asked for reached Brave.
    activity = message.model_extra["reasoning_content"].splitlines()
    assert activity[0].startswith("Searched 'python asyncio' (de-DE): ")
    assert activity[1].startswith("Read ") and pages.host.split(":")[0] in activity[1]
    assert brave.requests[-1].params["country"] == "DE"
    # And every result and page of the answer, numbered as cited.
    sources = message.model_extra["sources"]
    number = int(re.search(r"\[(\d+)\]", message.content).group(1))
    assert sources[number - 1]["url"] == article and sources[number - 1]["read"]
    assert len(sources) > 1 and not all(s["read"] for s in sources)
    assert len(llm.requests) == 3 and llm.requests[2].body["messages"][-1]["role"] == "tool"


def test_streamed_with_usage_in_the_last_chunk(chat, llm, brave, pages):
    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    stream = client_of(chat).chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": f"How does asyncio work? {article}"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"search_language": "en-GB"},
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    assert text.startswith("Asyncio runs coroutines on an event loop [")
    assert "Searched 'python asyncio' (en-GB)" in reasoning
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finish] == ["stop"]
    annotations = finish[0].choices[0].delta.model_extra["annotations"]
    assert annotations[0]["url_citation"]["url"] == article
    assert article in [s["url"] for s in finish[0].choices[0].delta.model_extra["sources"]]
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == 2200
    assert chunks[-1].usage.completion_tokens == 23
    assert brave.requests[-1].params["country"] == "GB"


def test_activity_off_and_web_search_off(chat, llm, brave):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "x"})]),
        Reply(text="Done."),
        Reply(text="Without tools."),
    )
    client = client_of(chat)
    quiet = client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "q"}],
        extra_body={"search_activity": False},
    )
    assert quiet.choices[0].message.content == "Done."
    assert "reasoning_content" not in (quiet.choices[0].message.model_extra or {})
    off = client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "q"}],
        extra_body={"web_search": False},
    )
    assert off.choices[0].message.content == "Without tools."
    assert "tools" not in llm.requests[-1].body
    assert "Today is" in llm.requests[-1].body["messages"][0]["content"]


def test_the_model_servers_reasoning_passes_through(chat, llm):
    llm.script(Reply(reasoning="Thinking it over.", text="Yes."))
    answer = client_of(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "q"}]
    )
    assert answer.choices[0].message.model_extra["reasoning_content"] == "Thinking it over."


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_a_client_tool_is_passed_through_and_continued(chat, llm, brave):
    weather_by_the_client_s_tool(llm)
    client = client_of(chat)
    asked = [{"role": "user", "content": "Weather in Kraków?"}]
    first = client.chat.completions.create(model="fake-model", messages=asked, tools=[WEATHER])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [c.function.name for c in choice.message.tool_calls] == ["get_weather"]
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"city": "Kraków"}
    assert tool_names(llm.requests[0]) == ["get_weather", "web_search", "web_fetch"]
    assert len(brave.requests) == 1  # ours ran here

    history = [
        *asked,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [c.model_dump() for c in choice.message.tool_calls],
        },
        {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21 °C"},
    ]
    second = client.chat.completions.create(model="fake-model", messages=history, tools=[WEATHER])
    assert second.choices[0].message.content == "It is sunny in Kraków."
    assert llm.requests[-1].body["messages"][-1] == history[-1]


def test_a_client_tool_named_like_ours_wins(chat, llm, brave):
    theirs = {**WEATHER, "function": {**WEATHER["function"], "name": "web_search"}}
    llm.script(Reply(tool_calls=[ToolCall("web_search", {"query": "q"})]))
    answer = client_of(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "q"}], tools=[theirs]
    )
    assert answer.choices[0].finish_reason == "tool_calls"
    assert tool_names(llm.requests[0]) == ["web_search", "web_fetch"]
    assert llm.requests[0].body["tools"][0]["function"]["description"] == "The weather in a city"
    assert brave.requests == []


def test_a_model_that_refuses_tools_is_answered_without(chat, llm):
    steps = [Reply(text='{"query": "q"}'), Reply(text='{"read": 0}')]
    llm.script(tools_unsupported(), *steps, Reply(text="Plain."))
    answer = client_of(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "q"}]
    )
    assert answer.choices[0].message.content == "Plain."
    assert "tools" in llm.requests[0].body
    assert not any("tools" in r.body for r in llm.requests[1:])


@pytest.mark.socket  # Stop is the hang-up
def test_stop_closes_the_model_servers_request(chat, llm):
    llm.script(Reply(text="word ", endless=True, chunk_delay=0.02))
    stream = client_of(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "talk"}], stream=True
    )
    for number, _ in enumerate(stream):
        if number == 5:
            break
    stream.close()
    assert llm.wait_hung_up(timeout=5) is not None


@pytest.mark.socket  # the client's timeout is a hang-up
def test_a_client_that_gives_up_on_a_whole_answer_ends_the_model_request(chat, llm):
    """Not streamed: the client's hang-up (here a timeout) closes the model server's request
    at once, not after the whole answer, and no tool round follows."""
    llm.script(
        Reply(
            text="Let me look that up. " * 40,
            tool_calls=[ToolCall("web_search", {"query": "slow"})],
            chunk_delay=0.05,  # about 10 s of answer
        )
    )
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "take your time"}]}
    with pytest.raises(httpx.TimeoutException):
        chat.http.post("/v1/chat/completions", json=body, timeout=1.0)
    hung_up = llm.wait_hung_up(index=0, timeout=3)
    assert hung_up is not None, "the model request went on after the client left"
    assert hung_up - llm.requests[0].received_at < 4
    assert not llm.requests[0].completed
    assert llm.wait_hung_up(index=1, timeout=1) is None and len(llm.requests) == 1


def test_models_are_the_pages(chat, llm):
    listed = client_of(chat).models.list()
    assert [m.id for m in listed.data] == ["fake-model", "fake-small"]


def error_of(call) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as raised:
        call()
    error = raised.value
    body = error.response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return error


def test_bad_requests_get_openai_errors(chat, llm):
    client = client_of(chat)
    missing = error_of(lambda: client.chat.completions.create(model="fake-model", messages=[]))
    assert missing.status_code == 400 and missing.body["param"].startswith("messages")
    unknown = error_of(
        lambda: client.chat.completions.create(
            model="no-such-model", messages=[{"role": "user", "content": "q"}]
        )
    )
    assert isinstance(unknown, openai.NotFoundError) and unknown.body["code"] == "model_not_found"
    url = "/v1/chat/completions"
    for body in (
        {"model": "fake-model"},
        {"model": 3, "messages": [{"role": "user", "content": "q"}]},
        {"model": "fake-model", "messages": "hello"},
        {"model": "fake-model", "messages": [{"role": "king", "content": "q"}]},
        {"model": "fake-model", "messages": [{"role": "user", "content": "q"}], "stream": "yes"},
    ):
        response = chat.http.post(url, json=body)
        assert response.status_code == 400, response.text
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    big = {"model": "fake-model", "messages": [{"role": "user", "content": "x" * 5_000_000}]}
    too_big = chat.http.post(url, json=big)
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "request_too_large"
    surrogate = b'{"model": "fake-model", "messages": [{"role": "user", "content": "\\ud800"}]}'
    lone = chat.http.post(url, content=surrogate, headers={"content-type": "application/json"})
    assert lone.status_code == 400 and "surrogate" in lone.json()["error"]["message"]
    broken = chat.http.post(url, content=b"{", headers={"content-type": "application/json"})
    assert broken.status_code == 400 and "error" in broken.json()
    assert chat.http.get("/v1/nothing").json()["error"]["type"]
    assert llm.requests == []


def test_an_unknown_path_or_method_is_an_invalid_request_naming_it_not_a_missing_model(chat, llm):
    client = client_of(chat)
    for method, path in (("post", "/no-such-endpoint"), ("get", "/chat"), ("delete", "/x/y")):
        call = getattr(client, method)
        error = error_of(lambda call=call, path=path: call(path, cast_to=object))
        assert isinstance(error, openai.NotFoundError), error
        assert error.body["type"] == "invalid_request_error" and error.body["code"] is None
        assert error.body["message"] == f"Invalid URL ({method.upper()} /v1{path})"
    wrong = chat.http.get("/v1/chat/completions")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert wrong.json()["error"]["type"] == "invalid_request_error"
    assert wrong.json()["error"]["message"].startswith("Invalid method (GET /v1/chat/completions)")
    assert "model" not in wrong.text and llm.requests == []


def test_an_upstream_failure_is_502(chat, llm):
    llm.script(server_error(500))
    error = error_of(
        lambda: client_of(chat).chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "q"}], stream=True
        )
    )
    assert error.status_code == 502 and error.body["type"] == "server_error"


@pytest.mark.socket  # Origin as a browser sends it
def test_the_token_is_a_bearer_token(guarded, auth_token, llm):
    llm.script(Reply(text="In."))
    refused = error_of(lambda: client_of(guarded).models.list())
    assert isinstance(refused, openai.AuthenticationError)
    client = client_of(guarded, api_key=auth_token)
    answer = client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "q"}]
    )
    assert answer.choices[0].message.content == "In."
    # Another web page still cannot use it: no CORS, foreign origins refused.
    foreign = guarded.http.get("/v1/models", headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403 and "access-control-allow-origin" not in foreign.headers
    preflight = guarded.http.options(
        "/v1/chat/completions",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers


@pytest.fixture
def small_window(request, searxng, pages, tmp_path):
    """A model server that serves a 2,500-token window (llama.cpp's /props says so)."""
    with FakeLLM(models=["fake-model"], n_ctx=2500) as small:
        env = chat_env(small, tmp_path, pages, MODELS="fake-model")
        with service_for(request, env, searxng.url) as service:
            yield service, small


def test_a_page_that_would_overflow_the_served_window_is_cut(small_window, pages):
    chat, small = small_window
    article = f"{pages.url}/huge?bytes=60000"
    small.script(Reply(tool_calls=[ToolCall("web_fetch", {"url": article})]), Reply(text="Ok."))
    question = f"Read {article} please. " + "Some context of mine. " * 10
    # Content parts, as clients with attachments send them.
    parts = [{"type": "text", "text": question}]
    answer = client_of(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": parts}]
    )
    assert answer.choices[0].message.content == "Ok."
    sent = small.requests[-1].body
    page = sent["messages"][-1]["content"]
    assert CUT_MARKER in page and page.rstrip().endswith(">")  # its web-data block closed
    tools = context.estimate_tokens(json.dumps(sent.get("tools", [])))
    reserve = context.completion_reserve(4096, 2500)
    assert history_tokens(sent["messages"]) + tools + reserve <= 2500


def test_sources_listed_in_the_text_on_request(chat, llm, brave, pages):
    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    answer = client_of(chat).chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": f"How does asyncio work? {article}"}],
        extra_body={"sources_in_text": True},
    )
    text = answer.choices[0].message.content
    assert text.startswith("Asyncio runs coroutines on an event loop [")
    assert text.endswith(")") and "\n\nSources:\n- [" in text and f"]({article})" in text


def test_a_failure_mid_stream_is_an_error_chunk(chat, llm):
    llm.script(Reply(text="The start of an answer that breaks.", break_after=2))
    stream = client_of(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "q"}], stream=True
    )
    received = []
    with pytest.raises(openai.APIError, match="the model server failed"):
        for chunk in stream:
            received.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in received if c.choices)


def test_a_prompt_too_long_for_the_model_is_a_400(chat, llm):
    # Retried once, as the page's turn retries (after reading the served window again).
    llm.script(context_length_exceeded(), context_length_exceeded())
    error = error_of(
        lambda: client_of(chat).chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "q"}]
        )
    )
    assert isinstance(error, openai.BadRequestError)
    assert error.body["code"] == "context_length_exceeded"
    assert len(llm.requests) == 2


def test_a_repeated_call_is_not_run_again(chat, llm, brave):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "same thing"})]),
        Reply(tool_calls=[ToolCall("web_search", {"query": "same thing"})]),
        Reply(text="Done."),
    )
    answer = client_of(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "q"}]
    )
    assert len(brave.requests) == 1
    assert "repeated" in llm.requests[2].body["messages"][-1]["content"]
    assert "(repeated" in answer.choices[0].message.model_extra["reasoning_content"]


def test_a_refusal_the_page_remembers_is_honoured(chat, llm):
    # The page's turn meets the refusal and remembers it for the model.
    steps = [Reply(text='{"query": "q"}'), Reply(text='{"read": 0}')]
    llm.script(
        tools_unsupported(), *steps, Reply(text="Page answer."), *steps, Reply(text="Plain.")
    )
    conversation = chat.http.post("/api/conversations", json={}).json()["id"]
    with chat.http.stream(
        "POST", f"/api/conversations/{conversation}/chat", json={"message": "q"}
    ) as response:
        response.read()
    answer = client_of(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "q"}]
    )
    assert answer.choices[0].message.content == "Plain."
    assert "tools" not in llm.requests[-1].body


def test_a_client_tool_call_streamed(chat, llm):
    llm.script(Reply(tool_calls=[ToolCall("get_weather", {"city": "Łódź"}, id="call_s")]))
    stream = client_of(chat).chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "Weather in Łódź?"}],
        tools=[WEATHER],
        stream=True,
    )
    chunks = [c for c in stream if c.choices]
    calls = [t for c in chunks for t in c.choices[0].delta.tool_calls or []]
    assert [(t.index, t.id, t.function.name) for t in calls] == [(0, "call_s", "get_weather")]
    assert json.loads(calls[0].function.arguments) == {"city": "Łódź"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_streamed_round_the_server_could_not_parse_is_said_to_be_discarded(chat, llm):
    """A streamed client has the garbage already: a Note in the reasoning says it was
    discarded, and the answer asked again without tools follows."""
    llm.script(
        llamacpp_stream_unparsed("fake-model", ["You may call ", "these tools"]),
        Reply(text='{"query": "capital"}'),  # the search made first, without tool calling
        Reply(text='{"read": 0}'),
        Reply(text="Warsaw."),
    )
    stream = client_of(chat).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "Capital?"}], stream=True
    )
    chunks = [chunk for chunk in stream if chunk.choices]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks
    )
    assert text == "You may call these toolsWarsaw."
    assert "Note: this model could not call the web tools (its output did not parse)" in reasoning
    assert "tools" not in llm.requests[-1].body


# -- one client cannot take the model connections -----------------------------------------------

STREAMED = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": "talk slowly"}],
    "stream": True,
}


@contextmanager
def held_streams(service, addresses: list[str]) -> Iterator[None]:
    """One /v1 stream from each address (a client behind the trusted proxy), each holding
    its model connection open until the block ends."""
    opened = threading.Semaphore(0)
    release = threading.Event()

    def hold(address: str) -> None:
        headers = {"X-Forwarded-For": address}
        with service.client() as client:
            with client.stream("POST", "/v1/chat/completions", json=STREAMED, headers=headers) as r:
                assert r.status_code == 200
                lines = r.iter_lines()  # kept: a line iterator dropped closes the stream
                next(lines)
                opened.release()
                release.wait(30)

    with ThreadPoolExecutor(len(addresses)) as pool:
        holders = [pool.submit(hold, address) for address in addresses]
        try:
            for _ in addresses:
                assert opened.acquire(timeout=30), [h.exception() for h in holders if h.done()]
            yield
        finally:
            release.set()


@pytest.fixture
def per_client(request, llm, searxng, pages, tmp_path):
    """Two /v1 answers at once per client; clients told apart by the proxy on loopback."""
    llm.clear()
    env = chat_env(llm, tmp_path, pages, V1_ANSWERS_PER_CLIENT="2", TRUSTED_PROXIES="127.0.0.1")
    with service_for(request, env, searxng.url) as service:
        yield service


def refused(service, address: str) -> httpx.Response:
    headers = {"X-Forwarded-For": address}
    return service.http.post("/v1/chat/completions", json=STREAMED, headers=headers)


@pytest.mark.socket  # many streams held open at once, from several clients
def test_one_client_cannot_take_the_model_connections_from_the_page(per_client, llm):
    """Beyond its own cap a client gets OpenAI's 429 with a Retry-After, at once; all /v1
    clients together cannot take the connections the page's turns need."""
    llm.script(*[Reply(text="word " * 20, stall_after=1) for _ in range(V1_TOTAL_ANSWERS)])
    with held_streams(per_client, ["192.0.2.1", "192.0.2.1"]):
        third = refused(per_client, "192.0.2.1")
        assert third.status_code == 429 and int(third.headers["retry-after"]) > 0
        error = third.json()["error"]
        assert (
            error["code"] == "rate_limit_exceeded" and "V1_ANSWERS_PER_CLIENT" in error["message"]
        )
        others = [f"198.51.100.{n // 2}" for n in range(V1_TOTAL_ANSWERS - 2)]
        with held_streams(per_client, others):
            beyond = refused(per_client, "203.0.113.9")
            assert beyond.status_code == 429
            assert "/v1 answers are running" in beyond.json()["error"]["message"]
            # As the openai SDK reads it, streamed or not: its RateLimitError, not a failure
            # of the model server.
            sdk = client_of(per_client).with_options(max_retries=0)
            hi = [{"role": "user", "content": "hi"}]
            for stream in (False, True):
                with pytest.raises(openai.RateLimitError):
                    sdk.chat.completions.create(model="fake-model", messages=hi, stream=stream)
            llm.script(Reply(text="The page's own answer."))
            conversation = new_conversation(per_client)
            turn = done(send(per_client, conversation, "hello"))
            assert turn["status"] == "complete"
    # The streams ended, their places are free again.
    llm.script(Reply(text="Again."))
    again = client_of(per_client).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "hi"}]
    )
    assert again.choices[0].message.content == "Again."
