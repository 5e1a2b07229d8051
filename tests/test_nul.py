"""A NUL (U+0000) never loses a write, on either backend: PostgreSQL's text refuses the
character and its jsonb the JSON escape, so the store drops it on the way in, on SQLite
alike (app/store/nul.py). One test per way text comes in: a title, a message, the model's
answer, a page read, search results, memory.md, a conversation's settings, older JSON files
imported at start; each on SQLite and on PostgreSQL."""

from __future__ import annotations

import json

import pytest

from tests.chat_client import done, get_conversation, new_conversation, send, stream
from tests.conftest import ChatService, chat_env
from tests.fakes.llm_server import Reply, ToolCall

NUL = "\x00"


@pytest.fixture
def service(chat_on_backend: ChatService) -> ChatService:
    """conftest's `chat_on_backend`, under this module's name."""
    return chat_on_backend


def stored_text(conversation: dict[str, object]) -> str:
    """Everything the conversation holds, as JSON text (a NUL shows as its escape)."""
    return json.dumps(conversation)


def test_a_title_with_a_nul_is_kept_without_it(service):
    created = service.http.post("/api/conversations", json={"title": f"Pier{NUL}ogi"})
    assert created.status_code == 201, created.text
    assert created.json()["title"] == "Pierogi"
    conversation_id = created.json()["id"]
    renamed = service.http.patch(
        f"/api/conversations/{conversation_id}", json={"title": f"Żurek{NUL} i bigos"}
    )
    assert renamed.status_code == 200, renamed.text
    assert get_conversation(service, conversation_id)["title"] == "Żurek i bigos"


def test_a_message_and_an_answer_with_a_nul_are_both_saved(service, llm):
    llm.script(Reply(text=f"W Gdańsku{NUL}, na Starym Mieście."))
    conversation_id = new_conversation(service)
    finished = done(send(service, conversation_id, f"Gdzie zjeść{NUL} pierogi?"))
    assert finished["status"] == "complete"
    assert not finished.get("warnings")
    messages = get_conversation(service, conversation_id)["messages"]
    assert [m["content"] for m in messages] == [
        "Gdzie zjeść pierogi?",
        "W Gdańsku, na Starym Mieście.",
    ]
    assert get_conversation(service, conversation_id)["title"] == "Gdzie zjeść pierogi?"
    listed = service.http.get("/api/conversations", params={"q": f"gdańsku{NUL}"})
    assert [entry["id"] for entry in listed.json()] == [conversation_id]


def test_a_page_read_with_a_nul_keeps_the_answer(service, llm, pages):
    page = f"{pages.url}/nul"
    llm.script(
        Reply(tool_calls=[ToolCall("web_fetch", {"url": page})]),
        Reply(text="The notes say little."),
    )
    conversation_id = new_conversation(service)
    finished = done(send(service, conversation_id, f"What does {page} say?"))
    assert finished["status"] == "complete"
    assert not finished.get("warnings")
    conversation = get_conversation(service, conversation_id)
    assert conversation["messages"][-1]["content"] == "The notes say little."
    assert "Notes from a dump: the byte" in stored_text(conversation)
    assert "\\u0000" not in stored_text(conversation)


def test_search_results_with_a_nul_keep_the_answer(service, llm):
    # The model's query carries the NUL, and the results name the query.
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": f"pierogi{NUL} ruskie"})]),
        Reply(text="Ruskie have potato and cheese."),
    )
    conversation_id = new_conversation(service)
    events = send(service, conversation_id, "Co to są pierogi ruskie?")
    search = next(event for event in events if event["type"] == "search")
    assert search["results"]
    finished = done(events)
    assert finished["status"] == "complete"
    assert not finished.get("warnings")
    conversation = get_conversation(service, conversation_id)
    assert conversation["messages"][-1]["content"] == "Ruskie have potato and cheese."
    assert "\\u0000" not in stored_text(conversation)


def test_memory_with_a_nul_is_kept_without_it(service):
    written = service.http.put("/api/memory", json={"text": f"Drinks tea{NUL}.\nLives in Łódź."})
    assert written.status_code == 200, written.text
    assert written.json()["text"] == "Drinks tea.\nLives in Łódź."
    assert service.http.get("/api/memory").json()["text"] == "Drinks tea.\nLives in Łódź."
    fact = service.http.post("/api/memory/facts", json={"fact": f"Likes{NUL} żurek"})
    assert fact.status_code == 200, fact.text
    assert fact.json()["text"] == "Drinks tea.\nLives in Łódź.\n- Likes żurek\n"


def test_settings_with_a_nul_are_kept_without_it(service, llm):
    conversation_id = new_conversation(service, system_prompt=f"Answer{NUL} in Polish.")
    changed = service.http.patch(
        f"/api/conversations/{conversation_id}",
        json={"settings": {"tool_note": f"Search{NUL} first."}},
    )
    assert changed.status_code == 200, changed.text
    settings = get_conversation(service, conversation_id)["settings"]
    assert settings["system_prompt"] == "Answer in Polish."
    assert settings["tool_note"] == "Search first."
    llm.script(Reply(text="Dobrze."))
    assert done(send(service, conversation_id, "Cześć"))["status"] == "complete"
    assert llm.requests[-1].body["messages"][0]["content"].startswith("Answer in Polish.")


def test_older_files_with_a_nul_are_imported_without_it(llm, searxng, tmp_path, database_url):
    folder = tmp_path / "data" / "conversations"
    folder.mkdir(parents=True)
    old = {
        "id": "20250301-0a1b2c3d4e",
        "title": f"Pierogi{NUL} w Gdańsku",
        "created": "2025-03-01T10:00:00.000000+00:00",
        "updated": "2025-03-01T10:05:00.000000+00:00",
        "settings": {"model": "fake-model", "system_prompt": f"Krótko{NUL}."},
        "messages": [
            {"role": "user", "content": f"Gdzie{NUL}?"},
            {
                "role": "assistant",
                "content": f"Na Starym{NUL} Mieście.",
                "status": "complete",
                "sources": [{"url": "https://example.pl/pierogi", "title": f"Pierog{NUL}arnia"}],
            },
        ],
    }
    (folder / f"{old['id']}.json").write_text(json.dumps(old), encoding="utf-8")
    env = chat_env(llm, tmp_path, DATABASE_URL=database_url)
    service = ChatService(env, searxng.url, socket=False).start()
    try:
        imported = get_conversation(service, old["id"])
        assert imported["title"] == "Pierogi w Gdańsku"
        assert imported["settings"]["system_prompt"] == "Krótko."
        assert [m["content"] for m in imported["messages"]] == ["Gdzie?", "Na Starym Mieście."]
        assert imported["messages"][1]["sources"][0]["title"] == "Pierogarnia"
        # A regenerate reads the stored answer's status (PostgreSQL: through jsonb).
        llm.script(Reply(text="W Krakowie też."))
        regenerated = stream(service, f"/api/conversations/{old['id']}/regenerate")
        assert done(regenerated)["status"] == "complete"
        answer = get_conversation(service, old["id"])["messages"][-1]
        assert answer["content"] == "W Krakowie też."
    finally:
        service.stop()
