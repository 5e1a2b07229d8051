"""The household's people as the tests sign them in (docs/household.md): Alice (the admin)
and Bob with passwords in a service's database, a person's own client with their session
cookie, a conversation of theirs with one answered question, and one whose answer searched. Used by
tests/test_household.py and tests/test_household_admin.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx

from app.store.database import Database
from app.store.passwords import hash_password
from app.store.users import NewUser
from tests.chat_client import done, new_conversation, send
from tests.conftest import ChatService, store_of
from tests.fakes.llm_server import Reply, ToolCall

PASSWORDS = {"alice": "alice's long password", "bob": "bob's long password"}


def add_people(data_dir: Path, database_url: str = "") -> None:
    """Alice (the admin) and Bob, with passwords, as `python -m app users add` keeps them."""
    database = Database(store_of(data_dir, database_url))
    try:
        for name, password in PASSWORDS.items():
            hashed = hash_password(password)
            database.add_user(NewUser(name, admin=name == "alice", password=hashed))
    finally:
        database.close()


@dataclass
class Person:
    """A person's browser: a client with their session cookie (chat_client takes it as a
    service: `http`, `socket`)."""

    http: httpx.Client
    socket: bool = False


def signed_in(service: ChatService, name: str, password: str | None = None) -> Person:
    client = service.client()
    given = password or PASSWORDS[name]
    answer = client.post("/api/session", json={"name": name, "password": given})
    assert answer.status_code == 200, answer.text
    return Person(client)


def talk(person: Person, llm, text: str) -> str:
    """A conversation of that person's with one answered question."""
    llm.script(Reply(text=f"An answer about {text}."))
    conversation_id = new_conversation(person)
    assert done(send(person, conversation_id, text))["status"] == "complete"
    return conversation_id


def searched(person: Person, llm, query: str) -> dict:
    """The search step of an answer that searched `query`, in a new conversation."""
    llm.script(Reply(tool_calls=[ToolCall("web_search", {"query": query})]), Reply(text="Nile."))
    conversation_id = new_conversation(person)
    assert done(send(person, conversation_id, f"Tell me: {query}?"))["status"] == "complete"
    messages = person.http.get(f"/api/conversations/{conversation_id}").json()["messages"]
    (step,) = [step for step in messages[-1]["activity"] if step["type"] == "search"]
    return step
