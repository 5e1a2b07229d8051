"""Nobody reaches another person's data, on any route (docs/security.md, "A household"):
Alice, known to the service by each way of signing in (tests/people.py's CREDENTIALS),
calls every route of /openapi.json with every method, /v1 and /mcp on Bob's ids and on
ids no one has: the same answer for both, never a success, and Bob's data unchanged.
Bob's searches serve her from no cache. Then schemathesis as Alice on Bob's ids, and the
spoofed proxy headers test_household does not try."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.chat_client import (
    done,
    get_conversation,
    new_conversation,
    numbered,
    raw_request,
    send,
)
from tests.conftest import (
    BACKENDS,
    NO_SEARXNG,
    ChatService,
    chat_env,
    new_database,
    run_main,
    service_for,
)
from tests.fakes.llm_server import FakeLLM, Reply, ToolCall
from tests.fakes.pages import PageServer
from tests.people import (
    CREDENTIALS,
    MISSING,
    USER_HEADER,
    Person,
    add_people,
    brave_queries,
    new_token,
    signed_in,
    talk,
)
from tests.research_model import (
    QUESTION,
    ScriptedResearcher,
    article,
    article_first,
    researcher,
    scripted_on,
)

__all__ = ["article", "researcher"]  # fixtures, imported to be used here

BOBS_WORDS = "kapusta kiszona"
"""In Bob's messages and answers, and his search: never in anything Alice gets."""
BOBS_FACT = "- Keeps bees in Gdańsk\n"
BOBS_QUERY = "kapusta kiszona przepis"
BOBS_MODEL = "bees-finetune:7b"
"""A model Bob added: "bees", as his fact, is what no answer to Alice may hold."""


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
    token: str
    """The id of a personal API token of his (as his account lists it, never the token)."""
    session: str
    """The id of a session of his."""


PERSONAL = {"conversation_id", "position", "token_id", "session_id"}
"""The path parameters that name something of a person's (Bob's, in these tests)."""
SHARED = {"model": "a model's refusal of the web tools: the household's, as the picker's models"}
"""The path parameters that name something of the household's, no one's own."""
ADMINS = {
    "person_id": "a person of the household, the admin's to manage (Alice is the admin): "
    "test_household_admin's anyone-but-an-admin test answers everyone else as a missing path",
}
"""The path parameters of the admin's routes, not tried here (Alice may use them)."""
ACCOUNT = ("/api/tokens", "/api/sessions", "/api/access")
"""A person's own sessions and tokens: refused (403) to a personal token, so that a token
cannot make one that would outlive its revocation."""


def bobs_values(bobs: Bobs) -> dict[str, list[Any]]:
    return {
        "conversation_id": bobs.conversations,
        "position": [bobs.versions_at],
        "token_id": [bobs.token],
        "session_id": [bobs.session],
    }


MISSING_VALUES: dict[str, Any] = {
    "conversation_id": MISSING,
    "position": 0,
    "token_id": "0" * 16,
    "session_id": "0" * 16,
}


def refusal(credential: str, path: str) -> int:
    """How a route refuses what is not the asker's: as a missing one (404), but the
    account's routes refuse a personal token outright."""
    return 403 if credential == "token" and path.startswith(ACCOUNT) else 404


def household_env(llm: FakeLLM, tmp: Path, pages: PageServer, database_url: str) -> dict[str, str]:
    """Alice and Bob in the database (passwords), and a forward-auth proxy on this machine
    that may name them: each way of signing in at once. Searches unpaced (a research makes
    several)."""
    add_people(tmp / "data", database_url)
    return chat_env(
        llm,
        tmp,
        pages,
        DATABASE_URL=database_url,
        SEARCH_RATE="50",
        TRUSTED_PROXIES="127.0.0.1",
        AUTH_USER_HEADER=USER_HEADER,
    )


@pytest.fixture
def household(request, llm, pages, searxng, brave, tmp_path, database_url) -> Iterator[ChatService]:
    """A household of the test's own, for a test that writes (a Start, a search)."""
    with service_for(
        request, household_env(llm, tmp_path, pages, database_url), searxng.url
    ) as service:
        yield service


def chat_path(conversation_id: str) -> str:
    return f"/api/conversations/{conversation_id}/chat"


def bobs_data(service: ChatService, llm: FakeLLM, researcher: ScriptedResearcher) -> Bobs:
    """Bob's conversations (one with versions), his research runs (one finished, one
    waiting on its plan), his memory.md, a model he added to his picker, and his search and
    measure in the search lab."""
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
        numbered(answer, until=lambda event: event["type"] == "research_plan")
    assert bob.http.put("/api/memory", json={"text": BOBS_FACT}).status_code == 200
    assert bob.http.put("/api/models", json={"models": [BOBS_MODEL]}).status_code == 200
    searched = bob.http.get("/api/lab/search", params={"q": BOBS_QUERY, "locale": "pl-PL"})
    assert searched.status_code == 200, searched.text
    measure = {"q": BOBS_QUERY, "locales": "pl-PL", "top": "10"}
    assert bob.http.get("/api/lab/measure", params=measure).status_code == 200
    new_token(bob)
    (token,) = bob.http.get("/api/tokens").json()
    (session,) = bob.http.get("/api/sessions").json()
    return Bobs([chat, finished, waiting], waiting, 0, token["id"], session["id"])


@dataclass(frozen=True)
class Household:
    """A household service with Bob's data and one conversation of Alice's in it, which the
    tests that take it only read."""

    service: ChatService
    bobs: Bobs
    alices: str
    """Alice's own conversation: the only one she has."""


@pytest.fixture(scope="module", params=BACKENDS)
def bobs_household(request, llm, pages, searxng, brave, tmp_path_factory) -> Iterator[Household]:
    """One household with Bob's data, built once a module (on each worker that runs its
    tests) for the tests that only read it: what Alice gets on Bob's ids as on ids no one
    has, what she lists, schemathesis as her. Each refusal leaves nothing; what she may
    leave (her sessions, her tokens, her own search cache) is no test's to read. A test that
    writes (a Start of Bob's, a search counted at Brave) takes `household`, its own."""
    database_url = ""
    if request.param == "postgresql":
        database_url = new_database(request.getfixturevalue("postgres_server"))
    tmp = tmp_path_factory.mktemp("household")
    with service_for(request, household_env(llm, tmp, pages, database_url), searxng.url) as service:
        # The model researches, and every search finds the article, only while Bob's data
        # is made: the module's tests share the fakes with every other test of the worker.
        with pytest.MonkeyPatch.context() as patched:
            article_first(brave, pages, patched)
            bobs = bobs_data(service, llm, scripted_on(llm, patched))
        alices = talk(signed_in(service, "alice"), llm, "soup")
        yield Household(service, bobs, alices)


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
        """Whether it names a person's own data (not the admin's routes)."""
        return bool(PERSONAL & set(self.parameters)) and not ADMINS.keys() & set(self.parameters)


def operations(service: ChatService) -> list[Operation]:
    """Every route and method the schema documents, each path parameter understood (one
    this module does not know fails the test: say whose data it names)."""
    spec = service.http.get("/openapi.json").json()
    found = []
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            names = tuple(p["name"] for p in operation.get("parameters", []) if p["in"] == "path")
            unknown = set(names) - PERSONAL - SHARED.keys() - ADMINS.keys()
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


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_every_route_answers_bobs_ids_as_it_answers_ids_no_one_has(
    household, llm, brave, researcher, article, credential
):
    bobs = bobs_data(household, llm, researcher)
    bob = signed_in(household, "bob")
    before = {c: get_conversation(bob, c) for c in bobs.conversations}
    asked, searched = len(llm.requests), brave_queries(brave)
    # His research waiting on its plan is a turn running: a stream he may follow.
    followed = call(bob, "GET", f"/api/conversations/{bobs.waiting}/events")
    assert (followed.status, followed.media) == (200, "text/event-stream; charset=utf-8")
    alice = CREDENTIALS[credential](household, "alice")
    answers = []
    for operation in operations(household):
        if not operation.personal():
            continue
        body = {"json": {}} if operation.body else {}
        missing_path = operation.path.format(**MISSING_VALUES)
        missing = call(alice, operation.method, missing_path, **body)
        # Answered before the route reads its body: whatever the body, a missing id is 404.
        assert missing.status == refusal(credential, operation.path), (operation, missing)
        for values in product(*(bobs_values(bobs)[name] for name in operation.parameters)):
            given = dict(zip(operation.parameters, values, strict=True))
            path = operation.path.format(**given)
            foreign = call(alice, operation.method, path, **body)
            as_missing = foreign.body
            for name, value in given.items():
                as_missing = as_missing.replace(str(value), str(MISSING_VALUES[name]))
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
def test_no_route_without_an_id_shows_alice_anything_of_bobs(bobs_household, credential):
    service, bobs = bobs_household.service, bobs_household.bobs
    alice = CREDENTIALS[credential](service, "alice")
    read = [op for op in operations(service) if op.method == "GET" and not op.parameters]
    assert len(read) >= 8
    seen = {op.path: call(alice, "GET", op.path, params={"q": BOBS_WORDS}) for op in read}
    for path, answer in seen.items():
        assert answer.status == (200 if refusal(credential, path) == 404 else 403), (path, answer)
    for path, answer in seen.items():
        for bobs_own in [*bobs.conversations, "bees", "Gdańsk"]:
            assert bobs_own not in answer.body, (path, bobs_own)
    assert json.loads(seen["/api/conversations"].body) == []  # his words match none of hers
    mine = call(alice, "GET", "/api/conversations").body
    assert [c["id"] for c in json.loads(mine)] == [bobs_household.alices]


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


# -- /v1 and /mcp -----------------------------------------------------------------------------

IDS = re.compile(r"(^|_)id$|conversation")
"""A field that could name something stored: an id, or a conversation."""
V1_QUESTIONS = {
    "/v1/chat/completions": {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "Hi"}],
    },
    "/v1/responses": {"model": "fake-model", "input": "Hi"},
}
"""A question each /v1 route answers, to which each field naming an id is added."""


def id_fields(spec: dict[str, Any], path: str) -> list[str]:
    schema = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return sorted(name for name in body["properties"] if IDS.search(name))


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_v1_answers_bobs_ids_as_ids_no_one_has(bobs_household, llm, credential):
    service, bobs = bobs_household.service, bobs_household.bobs
    alice = CREDENTIALS[credential](service, "alice")
    spec = service.http.get("/openapi.json").json()
    posts = sorted(
        path for path in spec["paths"] if path.startswith("/v1/") and "post" in spec["paths"][path]
    )
    assert posts == sorted(V1_QUESTIONS)  # a new /v1 route: add its question above
    asked = len(llm.requests)
    tried = []
    for path in posts:
        for field_name in id_fields(spec, path):
            question = V1_QUESTIONS[path]
            missing = call(alice, "POST", path, json={**question, field_name: MISSING})
            for bobs_id in bobs.conversations:
                foreign = call(alice, "POST", path, json={**question, field_name: bobs_id})
                as_missing = foreign.body.replace(bobs_id, MISSING)
                assert (foreign.status, as_missing) == (missing.status, missing.body), field_name
                tried.append((path, field_name, foreign.status))
    assert {(path, name) for path, name, _ in tried} >= {
        ("/v1/responses", "previous_response_id"),
        ("/v1/responses", "conversation"),
    }
    assert not [t for t in tried if 200 <= t[2] < 300]
    assert len(llm.requests) == asked


def text_of(result: Any) -> str:
    return json.dumps([block.model_dump(mode="json") for block in result.content])


@pytest.mark.socket  # the MCP SDK's client connects to an address
@pytest.mark.parametrize("credential", CREDENTIALS)
def test_mcp_answers_bobs_ids_as_ids_no_one_has(
    household, llm, brave, researcher, article, credential
):
    """Through the MCP SDK's client, Alice's session or proxy header on every request:
    each tool that takes an id or a conversation is called with Bob's and with missing
    ones (none does today: it would be, on its adding); a resource likewise; and her
    web_search of Bob's query asks Brave again."""
    bobs = bobs_data(household, llm, researcher)
    alice = CREDENTIALS[credential](household, "alice")

    async def scenario() -> list[tuple[str, str, str]]:
        async with httpx2.AsyncClient(headers=alice.headers, timeout=60) as http:
            transport = streamable_http_client(f"{household.url}/mcp", http_client=http)
            async with Client(transport) as client:
                answers = []
                tools = (await client.list_tools()).tools
                assert {"web_search", "web_fetch", "research"} <= {t.name for t in tools}
                for tool in tools:
                    for name in tool.input_schema.get("properties", {}):
                        if not IDS.search(name):
                            continue
                        missing = text_of(await client.call_tool(tool.name, {name: MISSING}))
                        for bobs_id in bobs.conversations:
                            foreign = await client.call_tool(tool.name, {name: bobs_id})
                            answers.append(
                                (tool.name, text_of(foreign).replace(bobs_id, MISSING), missing)
                            )
                if client.server_capabilities.resources is not None:
                    for template in (await client.list_resource_templates()).resource_templates:
                        missing_uri = re.sub(r"\{[^}]+\}", MISSING, template.uri_template)
                        missing = str(await client.read_resource(missing_uri))
                        for bobs_id in bobs.conversations:
                            uri = re.sub(r"\{[^}]+\}", bobs_id, template.uri_template)
                            foreign = str(await client.read_resource(uri)).replace(bobs_id, MISSING)
                            answers.append((template.uri_template, foreign, missing))
                before = brave_queries(brave)
                found = await client.call_tool(
                    "web_search", {"query": BOBS_QUERY, "locale": "pl-PL"}
                )
                assert not found.is_error, text_of(found)
                assert brave_queries(brave) > before  # not from Bob's cache
                return answers

    for name, foreign, missing in asyncio.run(scenario()):
        assert foreign == missing, name


# -- schemathesis on Bob's ids ------------------------------------------------------------------

EXAMPLES_PER_OPERATION = 8


def on_bobs_ids(spec: dict[str, Any], bobs: Bobs) -> dict[str, Any]:
    """The schema with each path parameter naming a person's data narrowed to Bob's."""
    values = bobs_values(bobs)
    narrowed = json.loads(json.dumps(spec))
    for methods in narrowed["paths"].values():
        for operation in methods.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] in PERSONAL:
                    parameter["schema"] = {"enum": values[parameter["name"]]}
    return narrowed


@pytest.mark.long  # schemathesis draws about 100 requests: 10 to 20 s
def test_schemathesis_as_alice_on_bobs_ids_gets_no_success(bobs_household):
    """Valid requests schemathesis draws from the schema (bodies, queries, headers), on
    Bob's ids, as Alice: none succeeds (a turn of Bob's that opened would be a 200)."""
    # Imported here: seconds of imports that the module's other tests do not need.
    import schemathesis
    from schemathesis.core import NotSet

    service, bobs = bobs_household.service, bobs_household.bobs
    alice = signed_in(service, "alice")
    schema = schemathesis.openapi.from_dict(
        on_bobs_ids(service.http.get("/openapi.json").json(), bobs)
    )
    answered: list[tuple[str, str, int]] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if not PERSONAL & {p.name for p in operation.path_parameters}:
            continue

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def drawn(case: Any) -> None:
            body = {} if isinstance(case.body, NotSet) else {"json": case.body}
            answer = call(
                alice,
                case.method,
                case.formatted_path,
                params=case.query,
                headers=case.headers,
                **body,
            )
            answered.append((case.operation.method.upper(), case.operation.path, answer.status))

        drawn()
    personal = {(op.method, op.path) for op in operations(service) if op.personal()}
    assert {(method, path) for method, path, _ in answered} == personal
    assert not [a for a in answered if 200 <= a[2] < 300]


# -- spoofing ----------------------------------------------------------------------------------


@pytest.fixture
def behind_another_proxy(request, llm, pages, searxng, brave, tmp_path) -> Iterator[ChatService]:
    """The proxy is elsewhere: the tests' address (127.0.0.1) is not trusted."""
    add_people(tmp_path / "data")
    env = chat_env(llm, tmp_path, pages, TRUSTED_PROXIES="192.0.2.10", AUTH_USER_HEADER=USER_HEADER)
    with service_for(request, env, searxng.url) as service:
        yield service


def test_the_header_from_an_untrusted_address_is_refused_on_every_route(behind_another_proxy):
    """Even beside Alice's own session: the header is never ignored, so a client that
    sends it learns at once that it is not believed."""
    service = behind_another_proxy
    alice = signed_in(service, "alice")
    paths = [
        (op.method, op.path.format(**MISSING_VALUES, **dict.fromkeys(SHARED, "m"), person_id=2))
        for op in operations(service)
    ]
    paths += [("POST", "/mcp"), ("GET", "/")]
    for method, path in paths:
        refused = alice.http.request(method, path, headers={USER_HEADER: "bob"})
        assert refused.status_code == 401, (method, path, refused.text)
        assert "only from TRUSTED_PROXIES" in refused.text, (method, path)


def test_a_disabled_person_named_by_the_proxy_is_refused(household, tmp_path, database_url):
    bob = CREDENTIALS["proxy"](household, "bob")
    assert bob.http.get("/api/conversations").status_code == 200
    done_ = run_main(
        "users",
        "disable",
        "bob",
        searxng_url=NO_SEARXNG,
        DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=database_url,
    )
    assert done_.returncode == 0, done_.stderr
    for path in ("/api/conversations", "/api/memory", "/v1/models", "/api/session"):
        refused = bob.http.get(path)
        assert refused.status_code == 401, (path, refused.text)
        assert "bob is disabled" in refused.text


@pytest.mark.socket  # raw bytes on the socket: in-process, httpx would make them UTF-8
def test_a_header_that_is_not_utf8_is_refused(household):
    for path in ("/api/conversations", "/v1/models"):
        assert raw_request(household.url, path, f"{USER_HEADER}: al\xe9ce".encode("latin-1")) == 401
        assert raw_request(household.url, path, f"{USER_HEADER}: alice".encode()) == 200
