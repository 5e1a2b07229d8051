"""The model server's window, read only from an answer that proves which server gave it,
and a page left out of that window for lack of room, never reported as read: on the
page's API, on /v1, and in `doctor`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import expect

from app.chat.fitting import CUT_MARKER, NO_ROOM
from tests.browser import opened
from tests.chat_client import done, get_conversation, new_conversation, send
from tests.conftest import ChatService, chat_env, run_main, service_for
from tests.fakes.conventions import vllm_models
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall
from tests.page_actions import send as type_and_send
from tests.page_actions import wait_turn_end

ANYTHING = [
    pytest.param({}, id="empty-object"),
    # Foreign JSON with a word of each probe's vocabulary, none of a server's shape.
    pytest.param(
        {"status": "success", "version": "1.2.3", "parameters": "num_ctx 2048", "models": []},
        id="foreign-json",
    ),
]
SMALL_WINDOW = 2500
"""A window that a cut page fills: the next page has no room left."""
LEFT_OUT = f"not read: did not fit in the model's window ({SMALL_WINDOW} tokens)"


@contextmanager
def service_on(
    request, fake: FakeLLM, searxng, tmp_path, pages=None, **extra: str
) -> Iterator[ChatService]:
    env = chat_env(fake, tmp_path, pages, MODELS="fake-model", **extra)
    with service_for(request, env, searxng.url) as service:
        yield service


def doctor_window_line(searxng, fake: FakeLLM, **env: str) -> str:
    run = run_main(
        "doctor",
        searxng_url=searxng.url,
        LLM_BASE_URL=fake.api_base,
        DEFAULT_MODEL="fake-model",
        MODELS="",
        **env,
    )
    assert run.returncode == 0, run.stdout + run.stderr  # a warning, not a failure
    return next(line for line in run.stdout.splitlines() if "served context window:" in line)


# -- which server says what ------------------------------------------------------------------


@pytest.mark.parametrize("anything", ANYTHING)
def test_a_server_answering_200_everywhere_leaves_the_configured_budget(
    request, searxng, tmp_path, anything
):
    with FakeLLM(models=["fake-model"], anything=anything) as fake:
        with service_on(request, fake, searxng, tmp_path, CONTEXT_BUDGET_TOKENS="50000") as chat:
            fake.script(Reply(text="Warsaw."))
            budget = done(send(chat, new_conversation(chat), "Capital of Poland?"))["budget"]
    assert budget["window"] is None  # not Ollama's 4,096 (nor its Modelfile's num_ctx)
    assert budget["limit"] == 50000
    assert budget["window_note"] is None


@pytest.mark.parametrize("anything", ANYTHING)
def test_doctor_warns_that_the_window_of_such_a_server_is_unknown(searxng, anything):
    with FakeLLM(models=["fake-model"], anything=anything) as fake:
        line = doctor_window_line(searxng, fake)
    assert line.startswith("warn") and "unknown" in line, line
    assert "Ollama" not in line.split("unknown", 1)[0] and "4096" not in line
    assert "CONTEXT_BUDGET_TOKENS" in line


def test_a_window_stated_in_context_budget_tokens_is_not_warned_of(searxng):
    """A hosted API never says its window: once the user has said how much fits, the
    check has nothing left to ask of them."""
    with FakeLLM(models=["fake-model"]) as hosted:
        line = doctor_window_line(searxng, hosted, CONTEXT_BUDGET_TOKENS="120000")
    assert line.startswith("ok") and "CONTEXT_BUDGET_TOKENS (120000)" in line, line


def test_vllm_max_model_len_is_the_served_window(request, searxng, tmp_path):
    with FakeLLM(models=["fake-model"], routes=vllm_models("fake-model", 8192)) as vllm:
        with service_on(request, vllm, searxng, tmp_path) as chat:
            vllm.script(Reply(text="Warsaw."))
            budget = done(send(chat, new_conversation(chat), "Capital of Poland?"))["budget"]
        line = doctor_window_line(searxng, vllm)
    assert budget["window"] == 8192 and budget["limit"] == 8192
    assert line.startswith("ok") and "8192" in line


# -- a page left out -------------------------------------------------------------------------


@pytest.fixture
def small_window(request, searxng, pages, tmp_path) -> Iterator[tuple[ChatService, FakeLLM]]:
    """A model server that serves a 2,500-token window (llama.cpp's /props says so)."""
    with FakeLLM(models=["fake-model"], n_ctx=SMALL_WINDOW) as small:
        with service_on(request, small, searxng, tmp_path, pages) as service:
            yield service, small


def search_then_read(small: FakeLLM, pages) -> tuple[str, str]:
    """In one round the model searches (its results cut to fill the window) and reads a
    page; it answers citing the first result. The page's address, and the question that
    gives it."""
    article = f"{pages.url}/article"
    calls = [
        ToolCall("web_search", {"query": "release notes"}),
        ToolCall("web_fetch", {"url": article}),
    ]
    small.script(Reply(tool_calls=calls), Reply(text="From the results [1]."))
    return article, f"What changed? The notes are at {article}"


def tool_messages(small: FakeLLM) -> list[str]:
    return [m["content"] for m in small.requests[-1].body["messages"] if m["role"] == "tool"]


def test_a_page_left_out_of_the_window_is_not_read_on_the_page(small_window, pages):
    chat, small = small_window
    article, question = search_then_read(small, pages)
    conversation_id = new_conversation(chat)
    events = send(chat, conversation_id, question)
    [fetch] = [e for e in events if e["type"] == "fetch"]
    assert fetch["url"] == article and fetch["title"]  # it was fetched...
    assert fetch["error"] == LEFT_OUT and fetch["left_out"] is True  # ...and not read
    sources = {s["url"]: s for s in done(events)["sources"]}
    assert sources[article]["read"] is False
    results, page = tool_messages(small)
    assert CUT_MARKER in results and page == NO_ROOM  # the model is told it has not read it
    stored = get_conversation(chat, conversation_id)["messages"][-1]
    assert [step["type"] for step in stored["activity"]] == ["search", "fetch"]
    assert stored["activity"][1]["error"] == LEFT_OUT
    assert not any(source["read"] for source in stored["sources"])
    exported = chat.http.get(f"/api/conversations/{conversation_id}/export").text
    assert "- not read: " in exported and "- read: " not in exported


def test_a_page_left_out_of_the_window_is_not_read_on_v1(small_window, pages):
    chat, small = small_window
    article, question = search_then_read(small, pages)
    answer = chat.http.post(
        "/v1/chat/completions",
        json={"model": "fake-model", "messages": [{"role": "user", "content": question}]},
    )
    assert answer.status_code == 200, answer.text
    message = answer.json()["choices"][0]["message"]
    activity = message["reasoning_content"].splitlines()
    assert activity[0].startswith("Searched 'release notes'")
    assert activity[1].startswith("Fetched ") and activity[1].endswith(LEFT_OUT), activity
    sources = message["sources"]
    assert [s["read"] for s in sources if s["url"] == article] == [False]
    assert not any(s["read"] for s in sources)
    [citation] = message["annotations"]
    assert citation["url_citation"]["url"] == sources[0]["url"] != article
    assert tool_messages(small)[1] == NO_ROOM


def two_searches(small: FakeLLM) -> None:
    """In one round the model searches twice: the first results are cut to fill the
    window, the second have no room left."""
    calls = [
        ToolCall("web_search", {"query": "release notes"}),
        ToolCall("web_search", {"query": "changelog"}),
    ]
    small.script(Reply(tool_calls=calls), Reply(text="From the first search [1]."))


NOT_GIVEN = f"results not given: did not fit in the model's window ({SMALL_WINDOW} tokens)"


def test_search_results_left_out_of_the_window_are_said_not_given(small_window):
    chat, small = small_window
    two_searches(small)
    events = send(chat, new_conversation(chat), "What changed in the last release?")
    first, second = [e for e in events if e["type"] == "search"]
    assert "error" not in first  # given, cut to the room left
    assert second["left_out"] is True and second["error"] == NOT_GIVEN
    assert tool_messages(small)[1] == NO_ROOM


def test_search_results_left_out_of_the_window_are_said_not_given_on_v1(small_window):
    chat, small = small_window
    two_searches(small)
    question = {"role": "user", "content": "What changed in the last release?"}
    answer = chat.http.post(
        "/v1/chat/completions", json={"model": "fake-model", "messages": [question]}
    )
    activity = answer.json()["choices"][0]["message"]["reasoning_content"].splitlines()
    # (A line may say the second search waited for the search plan's rate.)
    assert activity[-1] == f"Searched 'changelog' (pl-PL): {NOT_GIVEN}", activity
    assert tool_messages(small)[1] == NO_ROOM


def test_the_trail_shows_a_page_left_out_as_fetched_not_read(browser, small_window, pages):
    chat, small = small_window
    article, question = search_then_read(small, pages)
    with opened(browser, chat.url) as page:
        type_and_send(page, question)
        wait_turn_end(page)
        trail = page.locator(".trail").last
        expect(trail.locator("summary")).not_to_contain_text("Read")  # no page counted read
        trail.locator("summary").click()
        step = trail.locator(".timeline li.failed")
        expect(step).to_contain_text("Fetched “")
        expect(step).to_contain_text(LEFT_OUT)
        assert page.log.errors == []
