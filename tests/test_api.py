"""The chat service's HTTP API as the page (or curl) uses it: config, models, memory,
conversations, regenerate and rewind, what a turn reports, and the access token.

Everything runs against the real service, in-process unless the test hangs up (the `chat`
fixture, or a service of a test's own when it needs another model server or configuration)."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.chat.settings import PRESETS_DIR
from tests.chat_client import done, event_types, get_conversation, send, stream
from tests.conftest import ChatService, chat_env
from tests.fakes.llm_server import FakeLLM, Reply, server_error

TOOL_NOTE_START = "You can look things up."

JSON = {"content-type": "application/json"}


# -- helpers ---------------------------------------------------------------------------------


def create_conversation(chat, headers: dict[str, str] | None = None, **body: Any) -> dict[str, Any]:
    response = chat.http.post("/api/conversations", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()


def api_config(chat) -> dict[str, Any]:
    response = chat.http.get("/api/config")
    assert response.status_code == 200, response.text
    return response.json()


@contextlib.contextmanager
def own_service(llm: FakeLLM, tmp_path: Path, searxng_url: str, **env: str) -> Iterator[Any]:
    service = ChatService(chat_env(llm, tmp_path, **env), searxng_url, socket=False).start()
    try:
        yield service
    finally:
        service.stop()


# -- health and configuration ----------------------------------------------------------------


def test_healthz_reports_the_search_side(chat, llm, tmp_path):
    response = chat.http.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body.pop("search_plan")["rate_per_second"] == 1.0  # the free plan's, before Brave's
    assert body == {
        "status": "ok",
        "search": "ok",
        "database": {"backend": "sqlite", "answers": True},
    }
    with own_service(llm, tmp_path / "down", "http://127.0.0.1:9") as without_search:
        degraded = without_search.http.get("/healthz")
    assert degraded.status_code == 200
    degraded_body = degraded.json()
    del degraded_body["search_plan"]
    assert degraded_body == {
        "status": "degraded",
        "search": "unreachable",
        "database": {"backend": "sqlite", "answers": True},
    }


def test_config_groups_models_and_describes_every_setting(searxng, tmp_path):
    with FakeLLM(models=["fake-model", "fake-small", "qwen3:8b"]) as llm:
        with own_service(llm, tmp_path, searxng.url) as chat:
            added = chat.http.put("/api/models", json={"models": ["my-finetune"]})
            assert added.status_code == 200, added.text
            body = api_config(chat)

    assert body["models"] == {
        "configured": ["fake-model", "fake-small"],
        "server": ["qwen3:8b"],
        "added": ["my-finetune"],
    }
    assert body["default_model"] == "fake-model"
    assert body["summary_model"] == "fake-small"

    defaults = body["defaults"]
    assert defaults["model"] == "fake-model"
    assert defaults["context_budget"] == 102_400
    assert defaults["web_search"] is True and defaults["web_fetch"] is True
    assert defaults["search_max_uses"] == 3 and defaults["fetch_max_uses"] == 2
    assert defaults["search_locale"] == "pl-PL"
    assert "{transcript}" in defaults["compress_prompt"]
    assert "{searches}" in defaults["tool_note"] and "{fetches}" in defaults["tool_note"]

    # Each setting has help text, saying what changing it costs.
    assert set(body["help"]) == set(defaults)
    assert all(isinstance(text, str) and text.strip() for text in body["help"].values())

    presets = body["presets"]
    default_preset = (PRESETS_DIR / "default.txt").read_text(encoding="utf-8").strip()
    assert presets["default"] == default_preset
    assert defaults["system_prompt"] == default_preset


# -- the model list --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"models": "my-model"},
        {"models": ["ok-model", ""]},
        {"models": ["   "]},
        {"models": [3]},
        {"models": None},
        {},
        ["my-model"],
    ],
    ids=["string", "empty-string", "blank", "number", "null", "missing", "not-an-object"],
)
def test_put_models_refuses_bad_lists_and_changes_nothing(chat, body):
    first = chat.http.put("/api/models", json={"models": ["kept-model"]})
    assert first.status_code == 200
    response = chat.http.put("/api/models", json=body)
    assert response.status_code == 422
    assert response.json()["detail"]  # says what is wrong
    assert api_config(chat)["models"]["added"] == ["kept-model"]


def test_added_models_persist_for_a_fresh_service(chat, llm, searxng, tmp_path):
    response = chat.http.put(
        "/api/models", json={"models": ["gpt-oss:20b", "gemma3:4b", "gpt-oss:20b"]}
    )
    assert response.status_code == 200
    assert response.json() == {"models": ["gpt-oss:20b", "gemma3:4b"]}

    # A restart (a new service on the same DATA_DIR) still offers them.
    with own_service(llm, tmp_path, searxng.url) as restarted:
        assert restarted.settings.data_dir == chat.settings.data_dir
        assert api_config(restarted)["models"]["added"] == ["gpt-oss:20b", "gemma3:4b"]


# -- memory ----------------------------------------------------------------------------------


def test_memory_round_trip_reaches_the_model(chat, llm):
    assert chat.http.get("/api/memory").json() == {"text": ""}
    memory = "- The user lives in Kraków.\n- The user prefers metric units.\n"
    response = chat.http.put("/api/memory", json={"text": memory})
    assert response.status_code == 200
    assert chat.http.get("/api/memory").json() == {"text": memory}
    assert (chat.settings.data_dir / "memory.md").read_text(encoding="utf-8") == memory

    llm.script(Reply(text="About 4 minutes."))
    conversation_id = create_conversation(chat)["id"]
    done(send(chat, conversation_id, "How long do pierogi boil?"))
    system = llm.requests[-1].body["messages"][0]
    assert system["role"] == "system"
    assert "The user lives in Kraków." in system["content"]
    assert "The user prefers metric units." in system["content"]


@pytest.mark.parametrize("body", [{"text": 42}, {"text": None}, {}, ["text"]])
def test_memory_refuses_a_non_string_and_keeps_the_file(chat, body):
    chat.http.put("/api/memory", json={"text": "- kept fact\n"})
    response = chat.http.put("/api/memory", json=body)
    assert response.status_code == 422
    assert chat.http.get("/api/memory").json() == {"text": "- kept fact\n"}


# -- conversations ---------------------------------------------------------------------------


def test_create_uses_the_defaults_and_chosen_settings(chat):
    defaults = api_config(chat)["defaults"]
    plain = chat.http.post("/api/conversations", headers=JSON)  # no body at all
    assert plain.status_code == 201
    created = plain.json()
    assert created["title"] == "New conversation"
    assert created["settings"] == defaults
    assert created["messages"] == []
    assert get_conversation(chat, created["id"]) == created

    chosen = create_conversation(
        chat, title="  Trip to Lyon ", settings={"search_locale": "fr-fr", "web_fetch": False}
    )
    assert chosen["title"] == "Trip to Lyon"
    assert chosen["settings"]["search_locale"] == "fr-FR"
    assert chosen["settings"]["web_fetch"] is False
    assert chosen["settings"]["model"] == defaults["model"]


def test_create_with_bad_settings_is_refused_and_creates_nothing(chat):
    for body in (
        {"settings": {"context_budget": "big"}},
        {"settings": {"no_such_setting": 1}},
        {"title": ""},
    ):
        response = chat.http.post("/api/conversations", json=body)
        assert response.status_code == 422, body
    assert chat.http.get("/api/conversations").json() == []


def test_list_is_newest_first(chat, llm):
    # Start right after a second boundary: a quick user (or the page's own requests) makes
    # several conversations within one second, and they must still come newest first.
    llm.script(*(Reply(text="Noted.") for _ in range(5)))
    time.sleep(1.02 - time.time() % 1)
    ids = [create_conversation(chat, title=f"Conversation {n}")["id"] for n in range(5)]
    for conversation_id in ids:
        done(send(chat, conversation_id, "Hello"))
    listed = chat.http.get("/api/conversations").json()
    assert [c["id"] for c in listed] == ids[::-1]
    assert {"id", "title", "created", "updated"} <= set(listed[0])


def test_a_new_message_moves_a_conversation_to_the_top_and_a_rename_does_not(chat, llm):
    llm.script(*(Reply(text="Noted.") for _ in range(3)))

    def listed() -> list[str]:
        return [c["id"] for c in chat.http.get("/api/conversations").json()]

    first = create_conversation(chat, title="Older")["id"]
    done(send(chat, first, "One"))
    time.sleep(1.1)  # timestamps are to the second
    second = create_conversation(chat, title="Newer")["id"]
    done(send(chat, second, "Two"))
    assert listed() == [second, first]
    time.sleep(1.1)
    renamed = chat.http.patch(f"/api/conversations/{first}", json={"title": "Renamed"})
    assert renamed.json()["title"] == "Renamed"
    assert listed() == [second, first]
    done(send(chat, first, "Three"))
    assert listed() == [first, second]


def test_a_conversation_with_no_message_is_not_listed(chat, llm):
    create_conversation(chat, settings={"web_fetch": False})  # settings saved, nothing sent
    llm.script(Reply(text="An answer."))
    rewound = create_conversation(chat)["id"]
    done(send(chat, rewound, "A message taken back"))
    assert chat.http.post(f"/api/conversations/{rewound}/rewind", json={}).is_success
    llm.script(server_error(500))
    failed = create_conversation(chat)["id"]
    assert send(chat, failed, "A first message that fails")[-1]["type"] == "error"
    assert chat.http.get("/api/conversations").json() == []


@pytest.mark.parametrize(
    ("first_message", "title"),
    [
        (
            "```nginx\nserver { listen 80; }\n```\nWhy does this fail?",
            "server { listen 80; } Why does this fail?",
        ),
        ("# Plans\n- **Lyon** in [May](https://example.org/may)", "Plans Lyon in May"),
        (
            "Which is better for a home lab: FETCH_ALLOW_HOSTS or a second instance of it?",
            "Which is better for a home lab: FETCH_ALLOW_HOSTS or a…",
        ),
        ("FETCHME=" + "a" * 70, "FETCHME=" + "a" * 51 + "…"),
    ],
    ids=["code", "markdown", "long", "one-long-word"],
)
def test_a_first_message_titles_the_conversation_in_plain_words(chat, llm, first_message, title):
    """The sidebar's title reads as words: no Markdown marks, cut between words with an
    ellipsis (never a bare cut inside one, as "FETCHME=" was)."""
    llm.script(Reply(text="Noted."))
    conversation = create_conversation(chat)["id"]
    done(send(chat, conversation, first_message))
    assert get_conversation(chat, conversation)["title"] == title
    assert len(title) <= 60


def test_search_finds_by_title_and_by_message_text(chat, llm):
    llm.script(Reply(text="Boil them for four minutes in salted water."))
    dinner = create_conversation(chat, title="Dinner plans")["id"]
    done(send(chat, dinner, "How long do pierogi boil?"))
    other = create_conversation(chat, title="Bicycle repair")["id"]
    llm.script(Reply(text="Check the chain."))
    done(send(chat, other, "My bike squeaks"))

    def found(query: str) -> list[str]:
        response = chat.http.get("/api/conversations", params={"q": query})
        assert response.status_code == 200
        return [c["id"] for c in response.json()]

    assert found("dinner") == [dinner]  # title, any case
    assert found("BICYCLE") == [other]
    assert found("pierogi") == [dinner]  # the user's message
    assert found("salted water") == [dinner]  # the answer
    assert found("carburettor") == []
    assert set(found("")) == {dinner, other}


def test_patch_renames_and_changes_settings_only_where_asked(chat):
    created = create_conversation(chat)
    url = f"/api/conversations/{created['id']}"
    response = chat.http.patch(
        url,
        json={
            "title": "Renamed",
            "settings": {"search_locale": "de-de", "web_fetch": False, "fetch_max_uses": 1},
        },
    )
    assert response.status_code == 200, response.text
    stored = get_conversation(chat, created["id"])
    assert stored["title"] == "Renamed"
    expected = {
        **created["settings"],
        "search_locale": "de-DE",
        "web_fetch": False,
        "fetch_max_uses": 1,
    }
    assert stored["settings"] == expected
    assert response.json()["settings"] == expected

    for bad in ({"title": ""}, {"messages": []}, {"settings": {"search_max_uses": 99}}):
        assert chat.http.patch(url, json=bad).status_code == 422, bad
    assert get_conversation(chat, created["id"])["settings"] == expected


def test_first_message_names_the_conversation_and_the_picked_model_is_kept(chat, llm):
    created = create_conversation(chat)
    message = "  How do I   keep a sourdough starter alive while I am away for two weeks?"
    done(send(chat, created["id"], message, model="fake-small"))
    stored = get_conversation(chat, created["id"])
    # Whitespace collapsed, cut between words to 60 characters with the ellipsis.
    assert stored["title"] == "How do I keep a sourdough starter alive while I am away for…"
    assert stored["settings"]["model"] == "fake-small"
    assert llm.requests[-1].body["model"] == "fake-small"

    # The next message without a model goes to the one picked last.
    done(send(chat, created["id"], "And in winter?"))
    assert llm.requests[-1].body["model"] == "fake-small"
    assert get_conversation(chat, created["id"])["title"] == stored["title"]


def test_model_set_in_settings_answers_the_next_message(chat, llm):
    conversation_id = create_conversation(chat)["id"]
    url = f"/api/conversations/{conversation_id}"
    assert chat.http.patch(url, json={"settings": {"model": "fake-small"}}).status_code == 200
    done(send(chat, conversation_id, "hello"))
    assert llm.requests[-1].body["model"] == "fake-small"


def test_delete_then_it_is_gone(chat):
    conversation_id = create_conversation(chat, title="Short-lived")["id"]
    url = f"/api/conversations/{conversation_id}"
    response = chat.http.delete(url)
    assert response.status_code == 204
    assert response.content == b""
    assert chat.http.get(url).status_code == 404
    assert chat.http.delete(url).status_code == 404
    assert chat.http.get("/api/conversations").json() == []


def test_unknown_conversation_is_404(chat):
    url = "/api/conversations/20250101-0123456789"
    assert chat.http.get(url).status_code == 404
    assert chat.http.patch(url, json={"title": "x"}).status_code == 404
    assert chat.http.post(f"{url}/chat", json={"message": "hello"}).status_code == 404
    assert chat.http.post(f"{url}/rewind", json={}).status_code == 404


def test_the_data_is_one_database_and_the_memory_file(chat, llm):
    llm.script(Reply(text="Sure."))
    conversation_id = create_conversation(chat, title="On disk")["id"]
    done(send(chat, conversation_id, "Hello there"))
    chat.http.patch(f"/api/conversations/{conversation_id}", json={"title": "Renamed"})
    chat.http.put("/api/memory", json={"text": "- a fact\n"})
    chat.http.put("/api/models", json={"models": ["extra-model"]})

    data = chat.settings.data_dir
    assert (data / "memory.md").read_text(encoding="utf-8") == "- a fact\n"
    files = sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_file())
    assert files[0] == "chat.db" and "memory.md" in files
    assert not [f for f in files if f.endswith(".tmp")]
    # Readable without the service, by anything that reads SQLite.
    with sqlite3.connect(data / "chat.db") as db:
        title = db.execute("SELECT title FROM conversations WHERE id = ?", (conversation_id,))
        assert title.fetchone() == ("Renamed",)
        texts = db.execute("SELECT role, content FROM messages ORDER BY position").fetchall()
        assert texts == [("user", "Hello there"), ("assistant", "Sure.")]


# -- regenerate and rewind -------------------------------------------------------------------


def test_regenerate_answers_again_with_the_model_given(chat, llm):
    llm.script(Reply(text="First answer."), Reply(text="Second answer."))
    conversation_id = create_conversation(chat)["id"]
    done(send(chat, conversation_id, "Which is the longest river?"))
    assert get_conversation(chat, conversation_id)["settings"]["model"] == "fake-model"

    events = stream(
        chat, f"/api/conversations/{conversation_id}/regenerate", {"model": "fake-small"}
    )
    assert done(events)["status"] == "complete"
    assert "".join(e["text"] for e in events if e["type"] == "delta") == "Second answer."

    request = llm.requests[-1].body
    assert request["model"] == "fake-small"
    assert request["messages"][-1] == {"role": "user", "content": "Which is the longest river?"}
    assert all(m.get("content") != "First answer." for m in request["messages"])

    stored = get_conversation(chat, conversation_id)
    assert stored["settings"]["model"] == "fake-small"
    assert [(m["role"], m["content"]) for m in stored["messages"]] == [
        ("user", "Which is the longest river?"),
        ("assistant", "Second answer."),
    ]
    assert stored["messages"][1]["model"] == "fake-small"


def test_regenerate_on_an_empty_conversation_is_409(chat, llm):
    conversation_id = create_conversation(chat)["id"]
    response = chat.http.post(f"/api/conversations/{conversation_id}/regenerate", json={})
    assert response.status_code == 409
    assert get_conversation(chat, conversation_id)["messages"] == []
    assert llm.requests == []


def test_rewind_gives_back_the_last_message_and_removes_the_exchange(chat, llm):
    llm.script(Reply(text="Paris."), Reply(text="Berlin."))
    conversation_id = create_conversation(chat)["id"]
    done(send(chat, conversation_id, "Capital of France?"))
    done(send(chat, conversation_id, "Capital of Germny?"))
    url = f"/api/conversations/{conversation_id}/rewind"

    response = chat.http.post(url, json={})
    assert response.status_code == 200
    assert response.json() == {"message": "Capital of Germny?"}
    stored = get_conversation(chat, conversation_id)["messages"]
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
    ]

    assert chat.http.post(url, json={}).json() == {"message": "Capital of France?"}
    assert get_conversation(chat, conversation_id)["messages"] == []
    assert chat.http.post(url, json={}).status_code == 409


# -- what a turn reports ---------------------------------------------------------------------


def test_reasoning_streams_before_the_answer_and_is_kept(chat, llm):
    llm.script(Reply(reasoning="The user wants a number; four minutes.", text="Four minutes."))
    conversation_id = create_conversation(chat)["id"]
    events = send(chat, conversation_id, "How long do pierogi boil?")
    assert event_types(events) == ["reasoning", "delta", "done"]
    thought = "".join(e["text"] for e in events if e["type"] == "reasoning")
    assert thought == "The user wants a number; four minutes."

    answer = get_conversation(chat, conversation_id)["messages"][-1]
    assert answer["content"] == "Four minutes."
    assert answer["reasoning"] == "The user wants a number; four minutes."


def test_cost_is_summed_only_where_reported(chat, llm):
    llm.script(
        Reply(text="One.", usage={"prompt_tokens": 100, "completion_tokens": 5, "cost": 0.0025}),
        Reply(text="Two.", usage={"prompt_tokens": 130, "completion_tokens": 4}),
    )
    conversation_id = create_conversation(chat)["id"]
    first = done(send(chat, conversation_id, "first"))
    assert first["usage"]["cost"] == pytest.approx(0.0025)

    second = done(send(chat, conversation_id, "second"))
    assert second["usage"]["cost"] is None  # not reported: never shown as zero
    totals = second["totals"]
    assert totals["cost"] == pytest.approx(0.0025)
    assert totals["requests_with_cost"] == 1
    assert totals["requests_unreported_cost"] == 1
    assert totals["completion_tokens"] == 9


def test_measured_prompt_tokens_drive_the_next_projection(chat, llm):
    llm.script(
        Reply(text="Noted.", usage={"prompt_tokens": 50_000, "completion_tokens": 3}),
        Reply(text="Again."),
    )
    conversation_id = create_conversation(chat)["id"]
    first = done(send(chat, conversation_id, "Here is a long document."))
    assert first["budget"]["projected"] < 50_000
    assert first["budget"]["used"] == 50_000

    second = done(send(chat, conversation_id, "And a short question."))
    assert second["budget"]["projected"] >= 50_000


@pytest.mark.parametrize("served", [{"n_ctx": 2048}, {"ollama_num_ctx": 2048}])
def test_budget_never_exceeds_the_served_window(searxng, tmp_path, served):
    with FakeLLM(models=["fake-model", "fake-small"], **served) as llm:
        with own_service(llm, tmp_path, searxng.url) as chat:
            conversation_id = create_conversation(chat)["id"]
            budget = done(send(chat, conversation_id, "hello"))["budget"]
            assert budget["limit"] == 2048
            assert budget["window"] == 2048
            # The reply's reserve shrinks with the window instead of filling it.
            assert llm.requests[-1].body["max_tokens"] == 512

            smaller = create_conversation(chat, settings={"context_budget": 1500})["id"]
            budget = done(send(chat, smaller, "hello"))["budget"]
            assert budget["limit"] == 1500 and budget["window"] == 2048


@pytest.mark.parametrize(
    ("settings", "offered"),
    [
        ({}, ["web_search", "web_fetch"]),
        ({"web_search": False}, ["web_fetch"]),
        ({"web_search": False, "web_fetch": False}, []),
    ],
)
def test_tool_switches_decide_what_the_model_is_offered(chat, llm, settings, offered):
    conversation_id = create_conversation(chat, settings=settings)["id"]
    done(send(chat, conversation_id, "What is new in Python?"))
    request = llm.requests[-1].body
    system = request["messages"][0]["content"]
    if offered:
        assert [tool["function"]["name"] for tool in request["tools"]] == offered
        assert TOOL_NOTE_START in system
    else:
        assert "tools" not in request
        assert TOOL_NOTE_START not in system
        assert "more page(s)" not in system


# -- the access token ------------------------------------------------------------------------


def test_access_token_guards_the_api_but_not_healthz(llm, searxng, tmp_path):
    llm.clear()
    with own_service(
        llm, tmp_path, searxng.url, AUTH_TOKEN="secret-7f3a9c1e5b2d8046a1c3e5f7"
    ) as chat:
        good = {"Authorization": "Bearer secret-7f3a9c1e5b2d8046a1c3e5f7"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic secret"}):
            response = chat.http.get("/api/config", headers=headers)
            assert response.status_code == 401, headers
            refused = chat.http.post("/api/conversations", json={}, headers=headers)
            assert refused.status_code == 401
        assert not (chat.settings.data_dir / "conversations").exists()

        assert chat.http.get("/healthz").status_code == 200
        assert chat.http.get("/api/config", headers=good).status_code == 200

        conversation_id = create_conversation(chat, headers=good)["id"]
        llm.script(Reply(text="Authorised answer."))
        path = f"/api/conversations/{conversation_id}/chat"
        events = stream(chat, path, {"message": "hi"}, headers=good)
        assert done(events)["status"] == "complete"
        unauthorised = chat.http.post(path, json={"message": "hi"})
        assert unauthorised.status_code == 401


@pytest.mark.socket  # Stop is the hang-up
def test_an_answer_cut_by_stop_still_counts_in_the_next_projection(chat, llm):
    """A Stop leaves no usage (servers send it at the end); the cut answer is estimated."""
    conversation_id = create_conversation(chat)["id"]
    llm.script(Reply(text="short", usage={"prompt_tokens": 1000, "completion_tokens": 1}))
    done(send(chat, conversation_id, "first"))
    llm.script(Reply(text="long words " * 600, split=30, chunk_delay=0.01))
    stream(
        chat,
        f"/api/conversations/{conversation_id}/chat",
        {"message": "second"},
        stop=lambda events: sum(e["type"] == "delta" for e in events) >= 100,
    )
    deadline = time.monotonic() + 5
    while get_conversation(chat, conversation_id)["messages"][-1]["role"] != "assistant":
        assert time.monotonic() < deadline, "the interrupted answer was never stored"
        time.sleep(0.05)
    cut = get_conversation(chat, conversation_id)["messages"][-1]["content"]
    assert len(cut) >= 3000

    llm.script(Reply(text="third answer"))
    projected = done(send(chat, conversation_id, "third"))["budget"]["projected"]
    # measured 1000 + the unmeasured "second" exchange (3,000+ characters, ~1,000 tokens)
    # + the reply reserve (MAX_COMPLETION_TOKENS).
    reserve = chat.settings.max_completion_tokens
    assert projected >= 1000 + len(cut) // 3 + reserve
