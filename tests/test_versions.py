"""Answer versions and Edit through the API: a regenerated or edited turn keeps what it
replaced as a version, stored with its trail, sources, digest and usage; switching shows
another one, and the model's context follows the version shown. Each test runs on both
backends (SQLite, PostgreSQL)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.store.database import Database
from tests.chat_client import Events, done, get_conversation, new_conversation, send, stream
from tests.conftest import ChatService, store_of
from tests.fakes.llm_server import Reply, ToolCall, content_filtered, server_error
from tests.summaries import MEASURED, small_chat_on_backend, small_conversation, summary_reply

__all__ = ["small_chat_on_backend"]  # a fixture, imported to be used here


@pytest.fixture
def chat(chat_on_backend: ChatService) -> ChatService:
    """conftest's `chat_on_backend`, under this module's name."""
    return chat_on_backend


def regenerate(chat, conversation_id: str) -> Events:
    return stream(chat, f"/api/conversations/{conversation_id}/regenerate", {})


def edit(chat, conversation_id: str, message: str, position: int | None = None) -> Events:
    body: dict[str, Any] = {"message": message}
    if position is not None:
        body["position"] = position
    return stream(chat, f"/api/conversations/{conversation_id}/edit", body)


def switch(chat, conversation_id: str, position: int, index: int) -> httpx.Response:
    return chat.http.put(
        f"/api/conversations/{conversation_id}/turns/{position}/version",
        json={"index": index},
    )


def shown(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in conversation["messages"]]


def sent_texts(request) -> list[str]:
    return [str(m.get("content")) for m in request.body["messages"]]


def test_a_regenerated_answer_keeps_the_first_as_a_version_with_its_trail(chat, llm):
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "longest river"})]),
        Reply(text="The Nile [1].", usage={"prompt_tokens": 700, "completion_tokens": 5}),
        Reply(text="The Amazon.", usage={"prompt_tokens": 650, "completion_tokens": 3}),
    )
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Which is the longest river?"))
    first = get_conversation(chat, conversation_id)["messages"][1]
    assert first["activity"] and first["sources"]
    done(regenerate(chat, conversation_id))

    now = get_conversation(chat, conversation_id)
    assert shown(now) == [("user", "Which is the longest river?"), ("assistant", "The Amazon.")]
    assert now["messages"][0]["versions"] == {"index": 2, "count": 2}

    response = switch(chat, conversation_id, 0, 1)
    assert response.status_code == 200, response.text
    assert response.json()["messages"][0]["versions"] == {"index": 1, "count": 2}
    again = get_conversation(chat, conversation_id)
    assert shown(again) == [("user", "Which is the longest river?"), ("assistant", "The Nile [1].")]
    answer = again["messages"][1]
    for key in ("activity", "sources", "usage", "timing", "model", "status"):
        assert answer[key] == first[key], key

    # The next turn's model sees the version shown, with its sources' digest.
    llm.script(Reply(text="About 6,650 km."))
    done(send(chat, conversation_id, "How long is it?"))
    texts = sent_texts(llm.requests[-1])
    assert any(t.startswith("The Nile [1].") and "longest river" in t for t in texts)
    assert not any("The Amazon." in t for t in texts)


def test_edit_sends_the_new_question_and_keeps_the_old_turn_as_a_version(chat, llm):
    llm.script(Reply(text="Paris."), Reply(text="Berlin."))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Capital of Frnace?"))
    done(edit(chat, conversation_id, "Capital of Germany?"))

    texts = sent_texts(llm.requests[-1])
    assert texts[-1] == "Capital of Germany?"
    assert "Capital of Frnace?" not in texts and "Paris." not in texts
    now = get_conversation(chat, conversation_id)
    assert shown(now) == [("user", "Capital of Germany?"), ("assistant", "Berlin.")]
    assert now["messages"][0]["versions"] == {"index": 2, "count": 2}

    assert switch(chat, conversation_id, 0, 1).status_code == 200
    assert shown(get_conversation(chat, conversation_id)) == [
        ("user", "Capital of Frnace?"),
        ("assistant", "Paris."),
    ]
    # Regenerating the version shown adds a third; the other two stay.
    llm.script(Reply(text="Paris, still."))
    done(regenerate(chat, conversation_id))
    now = get_conversation(chat, conversation_id)
    assert now["messages"][0]["versions"] == {"index": 3, "count": 3}
    assert switch(chat, conversation_id, 0, 2).json()["messages"][1]["content"] == "Berlin."


def test_editing_an_earlier_message_keeps_it_and_every_later_turn_as_a_version(chat, llm):
    llm.script(*(Reply(text=t) for t in ("A1", "A2", "A2b", "A3", "B2")))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Q1"))
    done(send(chat, conversation_id, "Q2"))
    done(regenerate(chat, conversation_id))
    done(send(chat, conversation_id, "Q3"))

    done(edit(chat, conversation_id, "Q2 edited", position=2))
    # The model is asked the new message after the turns before it, nothing of the later ones.
    texts = sent_texts(llm.requests[-1])
    assert texts[-3:] == ["Q1", "A1", "Q2 edited"]
    assert not any(t in texts for t in ("Q2", "A2b", "Q3", "A3"))
    now = get_conversation(chat, conversation_id)
    assert shown(now) == [
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2 edited"),
        ("assistant", "B2"),
    ]
    assert now["messages"][2]["versions"] == {"index": 3, "count": 3}

    # The version set aside brings its later turn, and that turn's own versions, back.
    earlier = switch(chat, conversation_id, 2, 2).json()
    assert shown(earlier) == [
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2"),
        ("assistant", "A2b"),
        ("user", "Q3"),
        ("assistant", "A3"),
    ]
    assert earlier["messages"][2]["versions"] == {"index": 2, "count": 3}
    assert shown(switch(chat, conversation_id, 2, 3).json())[2:] == [
        ("user", "Q2 edited"),
        ("assistant", "B2"),
    ]


def test_an_edit_names_a_message_of_yours_that_is_not_folded(chat, llm):
    llm.script(Reply(text="A1"), Reply(text="A2"))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Q1"))
    done(send(chat, conversation_id, "Q2"))
    url = f"/api/conversations/{conversation_id}/edit"
    for position, status, says in ((1, 409, "position 1"), (7, 409, "position 7"), (-1, 422, "")):
        response = chat.http.post(url, json={"message": "Other", "position": position})
        assert response.status_code == status, response.text
        assert says in response.text
    assert shown(get_conversation(chat, conversation_id)) == [
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2"),
        ("assistant", "A2"),
    ]
    assert len(llm.requests) == 2


def test_rewinding_an_edited_earlier_message_brings_the_later_turns_back(chat, llm):
    llm.script(*(Reply(text=t) for t in ("A1", "A2", "B1")))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Q1"))
    done(send(chat, conversation_id, "Q2"))
    done(edit(chat, conversation_id, "Q1 edited", position=0))
    assert shown(get_conversation(chat, conversation_id)) == [
        ("user", "Q1 edited"),
        ("assistant", "B1"),
    ]
    response = chat.http.post(f"/api/conversations/{conversation_id}/rewind", json={})
    assert response.json() == {"message": "Q1 edited"}
    stored = get_conversation(chat, conversation_id)
    assert shown(stored) == [
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2"),
        ("assistant", "A2"),
    ]
    assert "versions" not in stored["messages"][0]


def test_export_holds_only_the_version_shown(chat, llm):
    llm.script(Reply(text="First answer."), Reply(text="Second answer."))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "A question"))
    done(regenerate(chat, conversation_id))
    assert switch(chat, conversation_id, 0, 1).status_code == 200
    markdown = chat.http.get(f"/api/conversations/{conversation_id}/export").text
    assert "First answer." in markdown and "Second answer." not in markdown


def test_switching_an_earlier_turn_brings_its_own_later_turns(chat, llm):
    llm.script(*(Reply(text=t) for t in ("A1", "A1b", "A2", "A2b")))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Q1"))
    done(regenerate(chat, conversation_id))
    done(send(chat, conversation_id, "Q2"))
    done(regenerate(chat, conversation_id))

    first = switch(chat, conversation_id, 0, 1).json()
    assert shown(first) == [("user", "Q1"), ("assistant", "A1")]
    assert first["messages"][0]["versions"] == {"index": 1, "count": 2}
    back = switch(chat, conversation_id, 0, 2).json()
    assert shown(back) == [
        ("user", "Q1"),
        ("assistant", "A1b"),
        ("user", "Q2"),
        ("assistant", "A2b"),
    ]
    assert back["messages"][2]["versions"] == {"index": 2, "count": 2}
    # The model gets the branch shown, nothing of the one set aside.
    llm.script(Reply(text="A3"))
    done(send(chat, conversation_id, "Q3"))
    texts = sent_texts(llm.requests[-1])
    assert texts[-5:] == ["Q1", "A1b", "Q2", "A2b", "Q3"]


def test_versions_are_refused_while_a_turn_streams_and_out_of_range(chat, llm):
    llm.script(Reply(text="One."), Reply(text="Two."))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Question"))
    done(regenerate(chat, conversation_id))
    assert switch(chat, conversation_id, 0, 3).status_code == 409
    assert switch(chat, conversation_id, 1, 1).status_code == 409  # an answer, not a turn
    assert switch(chat, conversation_id, 0, 0).status_code == 422

    llm.script(Reply(text="slow " * 100, split=5, chunk_delay=0.05))
    url = f"/api/conversations/{conversation_id}"
    with chat.client() as client:
        with client.stream("POST", f"{url}/chat", json={"message": "Next"}) as running:
            lines = running.iter_lines()
            next(lines)
            assert switch(chat, conversation_id, 0, 1).status_code == 409
            refused = client.post(f"{url}/edit", json={"message": "Other"})
            assert refused.status_code == 409
            for _line in lines:
                pass
    stored = get_conversation(chat, conversation_id)
    assert [m["content"] for m in stored["messages"] if m["role"] == "user"] == [
        "Question",
        "Next",
    ]
    assert stored["messages"][0]["versions"] == {"index": 2, "count": 2}


def test_an_edit_or_regenerate_that_fails_before_any_output_keeps_the_message(chat, llm):
    llm.script(Reply(text="Paris."), server_error(500), server_error(500))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Capital of France?"))
    events = edit(chat, conversation_id, "Capital of Spain?")
    assert events[-1]["type"] == "error" and events[-1]["restore"] is None
    stored = get_conversation(chat, conversation_id)
    assert shown(stored) == [("user", "Capital of Spain?")]
    assert stored["messages"][0]["versions"] == {"index": 2, "count": 2}
    # Regenerate fails the same way; an unanswered message makes no new version.
    events = regenerate(chat, conversation_id)
    assert events[-1]["type"] == "error" and events[-1]["restore"] is None
    assert get_conversation(chat, conversation_id)["messages"][0]["versions"]["count"] == 2
    assert shown(switch(chat, conversation_id, 0, 1).json()) == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
    ]


def test_a_filtered_edit_gives_its_text_back_and_the_old_turn_returns(chat, llm):
    llm.script(Reply(text="Paris."), content_filtered())
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Capital of France?"))
    events = edit(chat, conversation_id, "Something filtered")
    assert events[-1]["type"] == "error" and events[-1]["restore"] == "Something filtered"
    stored = get_conversation(chat, conversation_id)
    assert shown(stored) == [("user", "Capital of France?"), ("assistant", "Paris.")]
    assert "versions" not in stored["messages"][0]


def test_edit_of_an_empty_conversation_is_409(chat, llm):
    conversation_id = new_conversation(chat)
    response = chat.http.post(f"/api/conversations/{conversation_id}/edit", json={"message": "Hi"})
    assert response.status_code == 409
    assert get_conversation(chat, conversation_id)["messages"] == []
    assert llm.requests == []


def test_deleting_the_conversation_deletes_its_versions(chat, llm, tmp_path):
    llm.script(Reply(text="One."), Reply(text="Two."))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Question"))
    done(regenerate(chat, conversation_id))
    database = Database(store_of(chat.settings.data_dir, chat.settings.database_url))
    try:
        assert database.scalar("SELECT count(*) FROM turn_versions") == 1
        assert chat.http.delete(f"/api/conversations/{conversation_id}").status_code == 204
        assert database.scalar("SELECT count(*) FROM turn_versions") == 0
    finally:
        database.close()


def test_rewinding_an_edited_message_shows_the_version_it_replaced(chat, llm):
    llm.script(Reply(text="Paris."), Reply(text="Madrid."))
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Capital of France?"))
    done(edit(chat, conversation_id, "Capital of Spain?"))
    response = chat.http.post(f"/api/conversations/{conversation_id}/rewind", json={})
    assert response.json() == {"message": "Capital of Spain?"}
    stored = get_conversation(chat, conversation_id)
    assert shown(stored) == [("user", "Capital of France?"), ("assistant", "Paris.")]
    assert "versions" not in stored["messages"][0]
    assert stored["title"] == "Capital of France?"


def test_the_next_turns_projected_size_follows_the_version_shown(chat, llm):
    long_answer, short_answer = "A long answer. " * 700, "Short."
    llm.script(Reply(text=long_answer), Reply(text=short_answer))  # usage measured by the fake
    conversation_id = new_conversation(chat)
    done(send(chat, conversation_id, "Tell me everything."))
    done(regenerate(chat, conversation_id))

    def projected_after(index: int) -> int:
        assert switch(chat, conversation_id, 0, index).status_code == 200
        llm.script(Reply(text="Fine."))
        projected = done(send(chat, conversation_id, "And?"))["budget"]["projected"]
        assert chat.http.post(f"/api/conversations/{conversation_id}/rewind").is_success
        return projected

    with_long, with_short = projected_after(1), projected_after(2)
    assert with_long - with_short > 2000  # the long answer is ~2,600 tokens
    assert projected_after(1) - with_short > 2000  # and again after a follow-up went


def test_a_turn_folded_into_the_summary_keeps_its_versions_but_cannot_switch(
    small_chat_on_backend, llm
):
    small_chat = small_chat_on_backend
    conversation_id = small_conversation(small_chat)
    llm.script(Reply(text="First.", usage=MEASURED), Reply(text="Second.", usage=MEASURED))
    done(send(small_chat, conversation_id, "I prefer Python over Node.js for scripts."))
    done(regenerate(small_chat, conversation_id))
    llm.script(summary_reply("The user likes Python.", []), Reply(text="Next.", usage=MEASURED))
    events = send(small_chat, conversation_id, "What about packaging?")
    assert any(e["type"] == "compression" for e in events)
    stored = get_conversation(small_chat, conversation_id)
    assert stored["summarized"] >= 1
    assert stored["messages"][0]["versions"] == {"index": 2, "count": 2}
    response = switch(small_chat, conversation_id, 0, 1)
    assert response.status_code == 409 and "summary" in response.json()["detail"]
    assert shown(get_conversation(small_chat, conversation_id))[1] == ("assistant", "Second.")
