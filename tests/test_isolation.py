"""Nobody reaches another person's data, on any route (docs/security.md, "A household"):
Alice, known to the service by each way of signing in (tests/people.py's CREDENTIALS),
calls every route of /openapi.json with every method, /v1 and /mcp on Bob's ids and on
ids no one has: the same answer for both, never a success, and Bob's data unchanged.
Bob's searches serve her from no cache. Then schemathesis as Alice on Bob's ids, and the
spoofed proxy headers test_household does not try."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from typing import Any

import pytest

from tests.chat_client import done, get_conversation, new_conversation, send
from tests.conftest import ChatService, chat_env, service_for
from tests.fakes.brave_api import SEARCH_PATH, FakeBrave
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall
from tests.people import (
    CREDENTIALS,
    MISSING,
    USER_HEADER,
    Person,
    add_people,
    signed_in,
    talk,
)
from tests.research_model import QUESTION, ScriptedResearcher, article, researcher

__all__ = ["article", "researcher"]  # fixtures, imported to be used here

BOBS_WORDS = "kapusta kiszona"
"""In Bob's messages and answers, and his search: never in anything Alice gets."""
BOBS_FACT = "- Keeps bees in Gdańsk\n"
BOBS_QUERY = "kapusta kiszona przepis"
NO_SEARXNG = "http://127.0.0.1:9"


@dataclass(frozen=True)
class Bobs:
    """What Bob has, as the paths name it."""

    conversations: list[str]
    """A chat with a regenerated answer (two versions), a finished research, and a
    research waiting on its plan for his Start (a turn running)."""
    waiting: str
    """The conversation whose research waits."""
    versions_at: int
    """The position of his user message whose answer has two versions."""


PERSONAL = {"conversation_id", "position"}
"""The path parameters that name something of a person's (Bob's, in these tests)."""
SHARED = {"model": "a model's refusal of the web tools: the household's, as the picker's models"}
"""The path parameters that name something of the household's, no one's own."""


def bobs_values(bobs: Bobs) -> dict[str, list[Any]]:
    return {"conversation_id": bobs.conversations, "position": [bobs.versions_at]}


MISSING_VALUES: dict[str, Any] = {"conversation_id": MISSING, "position": 0}


@pytest.fixture
def household(request, llm, pages, searxng, brave, tmp_path, database_url) -> Iterator[ChatService]:
    """Alice and Bob in the database (passwords), and a forward-auth proxy on this machine
    that may name them: each way of signing in at once. Searches unpaced (a research makes
    several)."""
    add_people(tmp_path / "data", database_url)
    env = chat_env(
        llm,
        tmp_path,
        pages,
        DATABASE_URL=database_url,
        SEARCH_RATE="50",
        TRUSTED_PROXIES="127.0.0.1",
        AUTH_USER_HEADER=USER_HEADER,
    )
    with service_for(request, env, searxng.url) as service:
        yield service


def chat_path(conversation_id: str) -> str:
    return f"/api/conversations/{conversation_id}/chat"


def bobs_data(service: ChatService, llm: FakeLLM, researcher: ScriptedResearcher) -> Bobs:
    """Bob's conversations (one with versions), his research runs (one finished, one
    waiting on its plan), his memory.md and his cached search."""
    bob = signed_in(service, "bob")
    chat = talk(bob, llm, f"How is {BOBS_WORDS} made?")
    llm.script(Reply(text=f"Another answer about {BOBS_WORDS}."))
    regenerate = bob.http.post(f"/api/conversations/{chat}/regenerate", json={})
    assert regenerate.status_code == 200, regenerate.text
    versions = get_conversation(bob, chat)["messages"][0]["versions"]
    assert versions == {"index": 2, "count": 2}
    finished = new_conversation(bob)
    research = {"plan_seconds": 0.01}
    assert done(send(bob, finished, QUESTION, research=research))["status"] == "complete"
    waiting = new_conversation(bob)
    with bob.http.stream(
        "POST", chat_path(waiting), json={"message": QUESTION, "research": {"plan_seconds": 0}}
    ) as answer:
        assert answer.status_code == 200, answer.read()
        for line in answer.iter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["type"] == "research_plan":
                break
    assert bob.http.put("/api/memory", json={"text": BOBS_FACT}).status_code == 200
    searched = bob.http.get("/api/lab/search", params={"q": BOBS_QUERY})
    assert searched.status_code == 200, searched.text
    return Bobs([chat, finished, waiting], waiting, versions_at=0)


# -- every route of /openapi.json ---------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    """A method of a path of /openapi.json."""

    method: str
    path: str
    parameters: tuple[str, ...]
    """Its path parameters' names."""
    body: bool

    def personal(self) -> bool:
        return bool(PERSONAL & set(self.parameters))


def operations(service: ChatService) -> list[Operation]:
    """Every route and method the schema documents, each path parameter understood (one
    this module does not know fails the test: say whose data it names)."""
    spec = service.http.get("/openapi.json").json()
    found = []
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            names = tuple(p["name"] for p in operation.get("parameters", []) if p["in"] == "path")
            unknown = set(names) - PERSONAL - SHARED.keys()
            assert not unknown, f"{method} {path}: whose data do {unknown} name?"
            found.append(Operation(method.upper(), path, names, "requestBody" in operation))
    return found


@dataclass(frozen=True)
class Answer:
    status: int
    media: str
    body: str
    """Empty for an event stream: whether it opened is the point, not what it would say."""


def call(person: Person, method: str, path: str, **request: Any) -> Answer:
    """A request of `person`'s; an event stream that opens is not read (a running turn's
    would go on until it ends)."""
    with person.http.stream(method, path, **request) as answer:
        media = answer.headers.get("content-type", "")
        text = "" if media.startswith("text/event-stream") else answer.read().decode()
    return Answer(answer.status_code, media, text)


def brave_queries(brave: FakeBrave) -> int:
    return len([r for r in brave.requests if r.path == SEARCH_PATH])


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_every_route_answers_bobs_ids_as_it_answers_ids_no_one_has(
    household, llm, brave, researcher, article, credential
):
    bobs = bobs_data(household, llm, researcher)
    bob = signed_in(household, "bob")
    before = {c: get_conversation(bob, c) for c in bobs.conversations}
    asked, searched = len(llm.requests), brave_queries(brave)
    alice = CREDENTIALS[credential](household, "alice")
    answers = []
    for operation in operations(household):
        if not operation.personal():
            continue
        body = {"json": {}} if operation.body else {}
        missing_path = operation.path.format(**MISSING_VALUES)
        missing = call(alice, operation.method, missing_path, **body)
        # Answered before the route reads its body: whatever the body, a missing id is 404.
        assert missing.status == 404, (operation, missing)
        for values in product(*(bobs_values(bobs)[name] for name in operation.parameters)):
            given = dict(zip(operation.parameters, values, strict=True))
            path = operation.path.format(**given)
            foreign = call(alice, operation.method, path, **body)
            as_missing = foreign.body.replace(given["conversation_id"], MISSING)
            assert (foreign.status, foreign.media, as_missing) == (
                missing.status,
                missing.media,
                missing.body,
            ), (operation, path)
            answers.append(foreign.status)
    assert len(answers) >= 12 * len(bobs.conversations)  # every route of a conversation
    assert not [status for status in answers if 200 <= status < 300]
    # Nothing of Bob's changed, no turn ran, nothing was searched.
    assert {c: get_conversation(bob, c) for c in bobs.conversations} == before
    assert bob.http.get("/api/memory").json() == {"text": BOBS_FACT}
    assert (len(llm.requests), brave_queries(brave)) == (asked, searched)
    # His research still waits on its plan, for him: Alice's Stop did not stop it.
    start = bob.http.post(
        f"/api/conversations/{bobs.waiting}/research/plan", json={"questions": ["How long?"]}
    )
    assert start.status_code == 200, start.text


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_no_route_without_an_id_shows_alice_anything_of_bobs(
    household, llm, researcher, article, credential
):
    bobs = bobs_data(household, llm, researcher)
    alice = CREDENTIALS[credential](household, "alice")
    alices = talk(alice, llm, "soup")
    read = [op for op in operations(household) if op.method == "GET" and not op.parameters]
    assert len(read) >= 8
    seen = {op.path: call(alice, "GET", op.path, params={"q": BOBS_WORDS}) for op in read}
    assert all(answer.status == 200 for answer in seen.values()), seen
    for path, answer in seen.items():
        for bobs_own in [*bobs.conversations, "bees", "Gdańsk"]:
            assert bobs_own not in answer.body, (path, bobs_own)
    assert json.loads(seen["/api/conversations"].body) == []  # his words match none of hers
    mine = call(alice, "GET", "/api/conversations").body
    assert [c["id"] for c in json.loads(mine)] == [alices]


# -- the search cache --------------------------------------------------------------------------


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_bobs_searches_serve_alice_from_no_cache(household, llm, brave, credential):
    """Bob searches and measures in the search lab, then Alice asks the same anywhere she
    can: each asks Brave again, and no answer of hers is "from cache". (Each of hers in a
    locale of its own: her own cache serves her, rightly.)"""
    bob = signed_in(household, "bob")
    assert bob.http.get("/api/lab/search", params={"q": BOBS_QUERY}).status_code == 200
    everywhere = {"q": BOBS_QUERY, "locales": "pl-PL,de-DE,fr-FR,en-US", "top": "10"}
    assert bob.http.get("/api/lab/measure", params=everywhere).status_code == 200
    alice = CREDENTIALS[credential](household, "alice")

    def lab_search() -> None:
        answer = alice.http.get("/api/lab/search", params={"q": BOBS_QUERY, "locale": "pl-PL"})
        assert answer.json()["cached_age"] is None

    def lab_measure() -> None:
        measure = {"q": BOBS_QUERY, "locales": "de-DE", "top": "10"}
        assert alice.http.get("/api/lab/measure", params=measure).status_code == 200

    def chat_turn() -> None:
        search = Reply(tool_calls=[ToolCall("web_search", {"query": BOBS_QUERY})])
        llm.script(search, Reply(text="Soup."))
        conversation_id = new_conversation(alice, search_locale="fr-FR")
        assert done(send(alice, conversation_id, "What is it?"))["status"] == "complete"
        trail = get_conversation(alice, conversation_id)["messages"][-1]["activity"]
        (step,) = [step for step in trail if step["type"] == "search"]
        assert "cached_age" not in step

    def v1() -> None:
        search = Reply(tool_calls=[ToolCall("web_search", {"query": BOBS_QUERY})])
        llm.script(search, Reply(text="Soup."))
        question = {
            "model": "fake-model",
            "messages": [{"role": "user", "content": "What is it?"}],
            "search_language": "en-US",
        }
        assert alice.http.post("/v1/chat/completions", json=question).status_code == 200

    for asking in (lab_search, lab_measure, chat_turn, v1):
        before = brave_queries(brave)
        asking()
        assert brave_queries(brave) > before, asking.__name__
