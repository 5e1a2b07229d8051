"""The household's people as the tests sign them in (docs/household.md): Alice (the admin)
and Bob with passwords in a service's database, a person's client by each way of being
known to the service (`CREDENTIALS`), a conversation of theirs with one answered question,
and one whose answer searched."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from playwright.sync_api import expect

from app.store.database import Database
from app.store.passwords import hash_password
from app.store.users import NewUser
from tests.browser import opened
from tests.chat_client import done, new_conversation, send
from tests.conftest import ChatService, chat_env, service_for, store_of
from tests.fakes.brave_api import SEARCH_PATH, FakeBrave
from tests.fakes.llm_server import Reply, ToolCall

PASSWORDS = {"alice": "alice's long password", "bob": "bob's long password"}
MISSING = "20260101-0123456789"
"""A conversation id no one has."""
USER_HEADER = "Remote-User"
"""AUTH_USER_HEADER of the services behind a forward-auth proxy."""


@cache
def hashed(password: str) -> str:
    """The password's Argon2id hash, made once a process: 0.1 s of CPU a hash, which each
    household test would pay twice for the same two passwords (their salts are what
    test_users checks)."""
    return hash_password(password)


def add_people(data_dir: Path, database_url: str = "") -> None:
    """Alice (the admin) and Bob, with passwords, as `python -m app users add` keeps them."""
    database = Database(store_of(data_dir, database_url))
    try:
        for name, password in PASSWORDS.items():
            database.add_user(NewUser(name, admin=name == "alice", password=hashed(password)))
    finally:
        database.close()


@pytest.fixture
def home(request, llm, pages, searxng, brave, tmp_path, database_url) -> Iterator[ChatService]:
    """A service whose database holds Alice (the admin) and Bob: household mode."""
    add_people(tmp_path / "data", database_url)
    env = chat_env(llm, tmp_path, pages, DATABASE_URL=database_url)
    with service_for(request, env, searxng.url) as service:
        yield service


@pytest.fixture
def shared_home(request, llm, pages, searxng, brave, tmp_path) -> Iterator[ChatService]:
    """Alice and Bob sharing one search cache (SEARCH_CACHE_SHARED=1)."""
    add_people(tmp_path / "data")
    env = chat_env(llm, tmp_path, pages, SEARCH_CACHE_SHARED="1")
    with service_for(request, env, searxng.url) as service:
        yield service


@dataclass
class Person:
    """A person's browser: a client with their session cookie (chat_client takes it as a
    service: `http`, `socket`)."""

    http: httpx.Client
    socket: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    """What names them on each request (for a client of its own, such as the MCP SDK's)."""


def signed_in(service: ChatService, name: str, password: str | None = None) -> Person:
    client = service.client()
    given = password or PASSWORDS[name]
    answer = client.post("/api/session", json={"name": name, "password": given})
    assert answer.status_code == 200, answer.text
    return Person(client, headers={"Cookie": f"session={client.cookies['session']}"})


def sign_in_on_page(page, name: str) -> None:
    """The page's sign-in form filled as that person, and the page ready behind it."""
    page.fill("#login-name", name)
    page.fill("#login-token", PASSWORDS[name])
    page.keyboard.press("Enter")
    expect(page.locator("body")).to_have_attribute("data-ready", "yes")


def choose_password(page, password: str) -> None:
    """On a page opened at a sign-in link: the password chosen, and the page ready behind."""
    expect(page.locator("#login-title")).to_have_text("Welcome")
    page.fill("#login-token", password)
    page.keyboard.press("Enter")
    expect(page.locator("body")).to_have_attribute("data-ready", "yes")


@contextmanager
def signed_in_page(browser, url: str, name: str, **options) -> Iterator:
    """A page at `url` (`opened` with its keyword arguments) signed in there as that person
    on its sign-in form, its context closed on leaving."""
    with opened(browser, url, ready=False, **options) as page:
        sign_in_on_page(page, name)
        yield page


def named_by_proxy(service: ChatService, name: str) -> Person:
    """A person a forward-auth proxy on this machine signed in (the service must trust
    127.0.0.1 and read USER_HEADER)."""
    headers = {USER_HEADER: name}
    return Person(service.client(headers=headers), headers=headers)


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


def person_id(admin: Person, name: str) -> int:
    """A person's id, as the admin's list of the household gives it."""
    (found,) = [p["id"] for p in admin.http.get("/api/people").json() if p["name"] == name]
    return int(found)


def new_token(person: Person, label: str = "laptop") -> str:
    """A personal API token the person made on their account (shown this once)."""
    made = person.http.post("/api/tokens", json={"label": label})
    assert made.status_code == 201, made.text
    token: str = made.json()["token"]
    return token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def by_token(service: ChatService, name: str) -> Person:
    """A person's client that only carries a personal API token they made (no cookie)."""
    headers = bearer(new_token(signed_in(service, name), "isolation"))
    return Person(service.client(headers=headers), headers=headers)


CREDENTIALS: dict[str, Callable[[ChatService, str], Person]] = {
    "session": signed_in,
    "proxy": named_by_proxy,
    "token": by_token,
}
"""Each way a person is known to the service, for the tests that must hold whatever the
way: the page's session cookie, a trusted proxy's header, a personal API token."""


async def mcp_web_search(service: ChatService, token: str, query: str) -> CallToolResult:
    """web_search called through /mcp, as an MCP client with that token calls it."""
    async with httpx2.AsyncClient(headers=bearer(token), timeout=60) as http:
        async with Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as c:
            return await c.call_tool("web_search", {"query": query})


async def mcp_search(service: ChatService, token: str, query: str) -> list[dict]:
    """web_search's results through /mcp, as an MCP client with that token sees them."""
    result = await mcp_web_search(service, token, query)
    assert not result.is_error, result.content
    results: list[dict] = (result.structured_content or {})["results"]
    return results


def brave_queries(brave: FakeBrave) -> int:
    """How many web searches reached the fake Brave API: what the household spent."""
    return len([r for r in brave.requests if r.path == SEARCH_PATH])
