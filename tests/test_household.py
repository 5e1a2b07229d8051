"""Household mode (docs/household.md): who is asking (a trusted proxy's header, or a
person's session after signing in with name and password), and each person's own
conversations: another person's id answers exactly as a missing one. The single-user modes
are test_access's and every other module's."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import httpx2
import openai
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import expect

from app.store.database import Database
from tests import page_actions
from tests.browser import opened
from tests.chat_client import send
from tests.conftest import NO_SEARXNG, ChatService, chat_env, run_main, service_for, store_of
from tests.fakes.llm_server import Reply
from tests.openai_clients import client_of
from tests.people import (
    MISSING,
    PASSWORDS,
    Person,
    add_people,
    bearer,
    brave_queries,
    home,
    mcp_search,
    named_by_proxy,
    new_token,
    searched,
    shared_home,
    sign_in_on_page,
    signed_in,
    signed_in_page,
    talk,
)
from tests.summaries import MEASURED, SMALL_CHAT, small_conversation, summary_reply

__all__ = ["home", "shared_home"]  # fixtures, imported to be used here


# -- signing in --------------------------------------------------------------------------------


def test_with_people_in_the_database_the_page_asks_for_a_name(home):
    assert home.http.get("/api/session").json() == {
        "auth": True,
        "signed_in": False,
        "household": True,
    }
    assert home.http.get("/api/conversations").status_code == 401
    alice = signed_in(home, "alice")
    assert alice.http.get("/api/session").json()["person"] == "alice"
    assert alice.http.get("/api/conversations").json() == []


def test_a_wrong_password_is_refused_and_limited_as_the_token_is(home):
    with home.client() as client:
        tries = [("alice", "not her password"), ("carol", "anything at all")] * 2
        for name, password in [*tries, ("bob", "wrong")]:  # five within 10 minutes
            wrong = client.post("/api/session", json={"name": name, "password": password})
            assert (wrong.status_code, wrong.json()) == (401, {"detail": "wrong name or password"})
        for name in ("bob", "alice"):  # beyond the five
            limited = client.post("/api/session", json={"name": name, "password": "wrong"})
            assert limited.status_code == 429 and "retry-after" in limited.headers
        assert "session" not in client.cookies
        # The right password still signs in (others behind the same address are not locked out).
        right = client.post("/api/session", json={"name": "alice", "password": PASSWORDS["alice"]})
        assert right.status_code == 200 and client.get("/api/conversations").status_code == 200


def test_the_token_alone_signs_no_one_in(home):
    refused = home.http.post("/api/session", json={"token": "whatever it is"})
    assert refused.status_code == 422


def test_the_page_asks_for_a_name_and_a_password(browser, llm, pages, searxng, tmp_path, request):
    add_people(tmp_path / "data")
    with service_for(request, chat_env(llm, tmp_path, pages), searxng.url) as service:
        with opened(browser, service.url, ready=False) as page:
            expect(page.locator("#login-dialog")).to_be_visible()
            expect(page.locator("#login-title")).to_have_text("Sign in")
            page.fill("#login-name", "bob")
            page.fill("#login-token", PASSWORDS["alice"])
            page.keyboard.press("Enter")
            expect(page.locator("#login-error")).to_contain_text("wrong name or password")
            page.fill("#login-name", "alice")
            page.keyboard.press("Enter")
            expect(page.locator("body")).to_have_attribute("data-ready", "yes")
            llm.script(Reply(text="Hello, Alice."))
            page_actions.send(page, "Hello")
            page_actions.wait_turn_end(page)
            expect(page.locator(".message.assistant .answer")).to_have_text("Hello, Alice.")


def test_a_persons_draft_and_research_defaults_are_no_one_elses_on_the_same_browser(
    browser, llm, pages, searxng, tmp_path, request
):
    add_people(tmp_path / "data")
    with service_for(request, chat_env(llm, tmp_path, pages), searxng.url) as service:
        with signed_in_page(browser, service.url, "bob") as page:
            box = page.locator("#composer-input")
            box.fill("A surprise party for Alice on Friday")
            page.reload()
            expect(box).to_have_value("A surprise party for Alice on Friday")  # his, kept
            page.locator("#open-settings").click()
            page.fill("#research-pause", "45")
            page.locator("#save-research-pause").click()
            page.keyboard.press("Escape")
            page.context.clear_cookies()  # his session ends without a sign-out
            page.reload()
            sign_in_on_page(page, "alice")
            expect(box).to_have_value("")
            page.locator("#open-settings").click()
            expect(page.locator("#research-pause")).to_have_value("10")  # the default
            page.keyboard.press("Escape")
            box.fill("Half-typed by Alice")
            page.locator("#sign-out").click()
            sign_in_on_page(page, "bob")
            expect(box).to_have_value("A surprise party for Alice on Friday")
            page.locator("#open-settings").click()
            expect(page.locator("#research-pause")).to_have_value("45")
            kept = page.evaluate("JSON.stringify(Object.entries(localStorage))")
            assert "Half-typed by Alice" not in kept  # her sign-out took hers away


TOKEN = "s3cret-token-for-the-household-1234567890"


def test_the_access_token_opens_the_service_but_no_ones_conversations(
    request, llm, pages, searxng, brave, tmp_path
):
    add_people(tmp_path / "data")
    env = chat_env(llm, tmp_path, pages, AUTH_TOKEN=TOKEN)
    with service_for(request, env, searxng.url) as service:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert service.http.get("/api/config", headers=bearer).status_code == 200
        refused = service.http.get("/api/conversations", headers=bearer)
        assert refused.status_code == 401
        assert refused.json() == {
            "detail": "sign in as a person of the household (name and password)"
        }
        assert service.http.post("/api/conversations", headers=bearer, json={}).status_code == 401
        # Nor anyone's memory.md: the memory routes want a person.
        assert service.http.get("/api/memory", headers=bearer).status_code == 401
        put = service.http.put("/api/memory", headers=bearer, json={"text": "- Is no one\n"})
        assert put.status_code == 401


def test_a_disabled_persons_session_and_sign_in_are_refused_until_enabled(
    home, tmp_path, database_url
):
    def users(action: str) -> None:
        done = run_main(
            "users",
            action,
            "bob",
            searxng_url=NO_SEARXNG,
            DATA_DIR=str(tmp_path / "data"),
            DATABASE_URL=database_url,
        )
        assert done.returncode == 0, done.stderr

    bob = signed_in(home, "bob")
    assert bob.http.get("/api/conversations").status_code == 200
    users("disable")
    assert bob.http.get("/api/conversations").status_code == 401
    assert bob.http.get("/api/session").json()["signed_in"] is False
    again = home.http.post("/api/session", json={"name": "bob", "password": PASSWORDS["bob"]})
    assert again.status_code == 401
    # Enabled again, he signs in anew: the session he had when disabled stays ended.
    users("enable")
    assert bob.http.get("/api/conversations").status_code == 401
    assert signed_in(home, "bob").http.get("/api/conversations").status_code == 200


# -- each person's own conversations -----------------------------------------------------------


def test_each_person_sees_only_their_own_conversations(home, llm):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    alices = talk(alice, llm, "pierogi")
    bobs = talk(bob, llm, "bigos")
    assert [c["id"] for c in alice.http.get("/api/conversations").json()] == [alices]
    assert [c["id"] for c in bob.http.get("/api/conversations").json()] == [bobs]
    # Search in conversations too: Bob's words are not found from Alice's session.
    assert alice.http.get("/api/conversations", params={"q": "bigos"}).json() == []
    assert [c["id"] for c in bob.http.get("/api/conversations", params={"q": "bigos"}).json()] == [
        bobs
    ]


ROUTES = [
    ("GET", "", None),
    ("GET", "/export", None),
    ("PATCH", "", {"title": "Alice's now"}),
    ("PATCH", "", {"settings": {"search_locale": "de-DE"}}),
    ("POST", "/chat", {"message": "What did Bob ask?"}),
    ("POST", "/regenerate", {}),
    ("POST", "/edit", {"message": "Something else"}),
    ("GET", "/events", None),
    ("POST", "/stop", None),
    ("POST", "/research/write", {}),
    ("POST", "/research/plan", {"questions": ["What?"]}),
    ("PUT", "/turns/0/version", {"index": 1}),
    ("POST", "/rewind", None),
    ("DELETE", "", None),
]


def test_another_persons_conversation_answers_as_a_missing_one_on_every_route(home, llm):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    # Alice is the household's admin: that opens no one else's conversation either.
    assert alice.http.get("/api/session").json()["admin"] is True
    bobs = talk(bob, llm, "bigos")
    before = bob.http.get(f"/api/conversations/{bobs}").json()
    calls = len(llm.requests)
    for method, path, body in ROUTES:
        missing = alice.http.request(method, f"/api/conversations/{MISSING}{path}", json=body)
        foreign = alice.http.request(method, f"/api/conversations/{bobs}{path}", json=body)
        assert missing.status_code == 404, (method, path, missing.text)
        expected = missing.json()["detail"].replace(MISSING, bobs)
        assert (foreign.status_code, foreign.json()) == (404, {"detail": expected}), (method, path)
    assert len(llm.requests) == calls  # no turn ran
    assert bob.http.get(f"/api/conversations/{bobs}").json() == before


# -- each person's own memory.md --------------------------------------------------------------


def system_prompt(llm) -> str:
    """The system message of the model's last request: persona, memory, summary..."""
    content: str = llm.requests[-1].body["messages"][0]["content"]
    return content


def test_each_persons_memory_is_in_their_own_prompts_and_settings_only(home, llm):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    facts = {"alice": "- Is a vegetarian\n", "bob": "- Lives in Gdańsk\n"}
    for person, name in ((alice, "alice"), (bob, "bob")):
        saved = person.http.put("/api/memory", json={"text": facts[name]})
        assert saved.status_code == 200, saved.text
    assert alice.http.get("/api/memory").json() == {"text": facts["alice"]}
    assert bob.http.get("/api/memory").json() == {"text": facts["bob"]}
    talk(alice, llm, "soup")
    assert "Is a vegetarian" in system_prompt(llm) and "Gdańsk" not in system_prompt(llm)
    talk(bob, llm, "trams")
    assert "Gdańsk" in system_prompt(llm) and "vegetarian" not in system_prompt(llm)
    assert not (home.settings.data_dir / "memory.md").exists()


@pytest.fixture
def small_home(request, llm, pages, searxng, brave, tmp_path) -> Iterator[ChatService]:
    """Household mode, with a budget a few turns outgrow (tests/summaries.py)."""
    add_people(tmp_path / "data")
    llm.clear()
    with service_for(request, chat_env(llm, tmp_path, pages, **SMALL_CHAT), searxng.url) as home:
        yield home


def test_a_compression_saves_facts_to_the_conversations_owner_only(small_home, llm):
    alice, bob = signed_in(small_home, "alice"), signed_in(small_home, "bob")
    bobs = small_conversation(bob)
    llm.script(Reply(text="Python is a fine choice.", usage=MEASURED))
    send(bob, bobs, "I prefer Python over Node.js for scripts.")
    llm.script(
        summary_reply("Bob likes Python.", ["User prefers Python over Node.js"]),
        Reply(text="Second answer.", usage=MEASURED),
    )
    compression = next(e for e in send(bob, bobs, "And packaging?") if e["type"] == "compression")
    assert compression["facts_added"] == ["User prefers Python over Node.js"]
    assert bob.http.get("/api/memory").json() == {"text": "- User prefers Python over Node.js\n"}
    assert alice.http.get("/api/memory").json() == {"text": ""}
    talk(alice, llm, "scripts")
    assert "Python over Node.js" not in system_prompt(llm)


# -- each person's own models ------------------------------------------------------------------


def test_each_person_adds_models_of_their_own_and_may_answer_only_with_those(home, llm):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    assert alice.http.put("/api/models", json={"models": ["alices-ft"]}).status_code == 200
    assert bob.http.put("/api/models", json={"models": ["bobs-ft"]}).status_code == 200
    added = [p.http.get("/api/config").json()["models"]["added"] for p in (alice, bob)]
    assert added == [["alices-ft"], ["bobs-ft"]]

    # Bob cannot pick Alice's model: not for a conversation, not for an answer.
    settings = {"settings": {"model": "alices-ft"}}
    assert alice.http.post("/api/conversations", json=settings).status_code == 201
    refused = bob.http.post("/api/conversations", json=settings)
    assert refused.status_code == 404 and "unknown model 'alices-ft'" in refused.json()["detail"]
    bobs = talk(bob, llm, "bigos")
    asked = {"message": "And pierogi?", "model": "alices-ft"}
    assert bob.http.post(f"/api/conversations/{bobs}/chat", json=asked).status_code == 404

    # On /v1 a token lists and answers with its own person's models.
    mine, his = client_of(home, api_key=new_token(alice)), client_of(home, api_key=new_token(bob))
    assert "alices-ft" in [m.id for m in mine.models.list()]
    assert "alices-ft" not in [m.id for m in his.models.list()]
    with pytest.raises(openai.NotFoundError) as unknown:
        his.chat.completions.create(model="alices-ft", messages=[{"role": "user", "content": "Hi"}])
    assert unknown.value.body["code"] == "model_not_found"
    llm.script(Reply(text="Hello from the fine-tune."))
    answer = mine.chat.completions.create(
        model="alices-ft", messages=[{"role": "user", "content": "Hi"}]
    )
    assert answer.choices[0].message.content == "Hello from the fine-tune."


# -- each person's own search cache ------------------------------------------------------------


def test_bobs_search_is_not_served_from_alices_cache(home, llm, brave):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    assert "cached_age" not in searched(alice, llm, "longest river")
    assert "cached_age" not in searched(bob, llm, "longest river")
    assert brave_queries(brave) == 2  # Bob's search asked Brave again
    assert searched(alice, llm, "longest river")["cached_age"] >= 0  # her own cache serves her
    assert brave_queries(brave) == 2
    # The search lab alike.
    lab = [p.http.get("/api/lab/search", params={"q": "highest peak"}) for p in (alice, bob, bob)]
    assert [answer.json()["cached_age"] is None for answer in lab] == [True, True, False]
    assert brave_queries(brave) == 4


def test_a_shared_cache_tells_a_searchs_age_only_to_who_ran_it(shared_home, llm, brave):
    home = shared_home
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    first = searched(alice, llm, "longest river")
    bobs = searched(bob, llm, "longest river")
    assert brave_queries(brave) == 1  # served from the one cache
    assert "cached_age" not in bobs and bobs["results"] == first["results"]
    assert searched(alice, llm, "longest river")["cached_age"] >= 0


def test_emptying_the_cache_empties_only_ones_own_searches(home, llm, brave):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    searched(alice, llm, "longest river")
    searched(bob, llm, "longest river")
    assert alice.http.delete("/api/search-cache").json() == {"emptied": 1}
    assert searched(bob, llm, "longest river")["cached_age"] >= 0  # his kept
    assert "cached_age" not in searched(alice, llm, "longest river")
    assert brave_queries(brave) == 3


def test_in_a_shared_cache_one_empties_the_searches_they_ran(shared_home, llm, brave):
    alice, bob = signed_in(shared_home, "alice"), signed_in(shared_home, "bob")
    searched(alice, llm, "longest river")
    searched(bob, llm, "highest peak")
    assert alice.http.delete("/api/search-cache").json() == {"emptied": 1}
    assert searched(bob, llm, "highest peak")["cached_age"] >= 0
    searched(bob, llm, "longest river")
    assert brave_queries(brave) == 3  # hers went: asked again


# -- a trusted proxy's header ------------------------------------------------------------------

HEADERS = {
    "AUTH_USER_HEADER": "Remote-User",
    "AUTH_EMAIL_HEADER": "Remote-Email",
    "AUTH_NAME_HEADER": "Remote-Name",
}


@pytest.fixture
def proxied(request, llm, pages, searxng, brave, tmp_path) -> Iterator[ChatService]:
    """Behind a forward-auth proxy on this machine (the tests' client address)."""
    env = chat_env(llm, tmp_path, pages, TRUSTED_PROXIES="127.0.0.1", **HEADERS)
    with service_for(request, env, searxng.url) as service:
        yield service


def people(service: ChatService) -> list[str]:
    database = Database(store_of(service.settings.data_dir, service.settings.database_url))
    try:
        return [user.name for user in database.users()]
    finally:
        database.close()


def test_a_person_the_proxy_names_is_added_on_first_sight(proxied, llm, caplog):
    caplog.set_level(logging.INFO, logger="app.api.people")
    named = {"Remote-User": "carol", "Remote-Email": "carol@example.org", "Remote-Name": "Carol C."}
    assert proxied.http.get("/", headers=named).status_code == 200
    assert people(proxied) == []  # the page's own files look no one up
    assert proxied.http.get("/api/conversations", headers=named).json() == []
    session = proxied.http.get("/api/session", headers=named).json()
    assert session == {"auth": True, "signed_in": True, "household": True, "person": "Carol C."}
    assert people(proxied) == ["carol"]
    assert "added carol, named by the proxy 127.0.0.1 (not an admin)" in caplog.text
    assert proxied.http.get("/api/conversations").status_code == 401  # no header, no cookie


def test_the_proxys_people_each_see_their_own(proxied, llm):
    carol = Person(proxied.client(headers={"Remote-User": "carol"}))
    dave = Person(proxied.client(headers={"Remote-User": "dave"}))
    carols = talk(carol, llm, "pierogi")
    assert dave.http.get("/api/conversations").json() == []
    assert dave.http.get(f"/api/conversations/{carols}").status_code == 404
    assert [c["id"] for c in carol.http.get("/api/conversations").json()] == [carols]


def test_a_person_the_proxy_names_has_no_password_here_to_change(proxied):
    carol = named_by_proxy(proxied, "carol")
    assert "password" not in carol.http.get("/api/session").json()
    given = {"current": "anything at all", "password": "a new long password"}
    answer = carol.http.put("/api/password", json=given)
    assert answer.status_code == 409 and "home lab's login" in answer.json()["detail"]


def test_on_the_page_a_person_the_proxy_names_has_an_account_but_no_password(browser, proxied):
    with opened(browser, "about:blank", ready=False) as page:
        page.set_extra_http_headers({"Remote-User": "carol"})  # as the proxy adds it
        page.goto(proxied.url)
        expect(page.locator("body")).to_have_attribute("data-ready", "yes", timeout=15_000)
        open_account(page, 1280)
        expect(page.locator("#account-tokens")).to_be_visible()
        expect(page.locator("#password-form")).to_have_count(0)


@pytest.mark.parametrize(
    "headers",
    [
        [("Remote-User", "")],
        [("Remote-User", "alice"), ("Remote-User", "bob")],
        [("Remote-User", "x" * 257)],
        [("Remote-User", "ali\tce")],
        [("Remote-User", "alice\x1b[0m")],
        [("Remote-User", " alice")],
    ],
    ids=["empty", "two-values", "257-chars", "tab", "escape", "space-before"],
)
def test_a_header_that_is_not_one_name_is_refused(proxied, headers):
    refused = proxied.http.get("/api/conversations", headers=headers)
    assert refused.status_code == 401, refused.text
    assert proxied.http.get("/", headers=headers).status_code == 401
    assert people(proxied) == []


@pytest.fixture
def behind_another_proxy(request, llm, pages, searxng, brave, tmp_path):
    """The proxy is elsewhere: the tests' address (127.0.0.1) is not trusted."""
    env = chat_env(llm, tmp_path, pages, TRUSTED_PROXIES="192.0.2.10", **HEADERS)
    with service_for(request, env, searxng.url) as service:
        yield service


def test_the_header_from_an_untrusted_address_is_refused_not_ignored(behind_another_proxy):
    service = behind_another_proxy
    for path in ("/api/conversations", "/api/session", "/"):
        refused = service.http.get(path, headers={"Remote-User": "alice"})
        assert refused.status_code == 401, path
        assert "only from TRUSTED_PROXIES" in refused.json()["detail"]
    # A forwarded address claiming to be the proxy changes nothing.
    forwarded = {"Remote-User": "alice", "X-Forwarded-For": "192.0.2.10"}
    assert service.http.get("/api/conversations", headers=forwarded).status_code == 401
    assert people(service) == []


def test_a_header_setting_without_trusted_proxies_stops_the_start(llm, tmp_path):
    started = run_main(
        "doctor",
        searxng_url=NO_SEARXNG,
        DATA_DIR=str(tmp_path / "data"),
        AUTH_USER_HEADER="Remote-User",
        TRUSTED_PROXIES="",
    )
    assert started.returncode == 1
    assert "AUTH_USER_HEADER is believed only from TRUSTED_PROXIES" in started.stderr


# -- the first start in household mode --------------------------------------------------------


def test_the_single_user_conversations_become_the_first_admins(
    request, llm, pages, searxng, brave, tmp_path, database_url, caplog
):
    env = chat_env(llm, tmp_path, pages, DATABASE_URL=database_url)
    facts = "- Likes pierogi\n"
    with service_for(request, env, searxng.url) as alone:
        owner = Person(alone.http)
        mine = {talk(owner, llm, "pierogi"), talk(owner, llm, "bigos")}
        assert {c["id"] for c in alone.http.get("/api/conversations").json()} == mine
        assert alone.http.put("/api/memory", json={"text": facts}).status_code == 200
        assert alone.http.put("/api/models", json={"models": ["my-ft"]}).status_code == 200
    add_people(tmp_path / "data", database_url)
    caplog.set_level(logging.INFO, logger="app.api.people")
    with service_for(request, env, searxng.url) as home:
        assert "household mode: 2 users" in caplog.text
        assert "2 conversations of the single-user mode are now alice's" in caplog.text
        assert "memory.md of the single-user mode is now alice's" in caplog.text
        assert "models added in the single-user mode (1) are now alice's" in caplog.text
        alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
        assert {c["id"] for c in alice.http.get("/api/conversations").json()} == mine
        assert bob.http.get("/api/conversations").json() == []
        assert alice.http.get("/api/memory").json() == {"text": facts}
        assert bob.http.get("/api/memory").json() == {"text": ""}
        assert not (tmp_path / "data" / "memory.md").exists()
        added = [p.http.get("/api/config").json()["models"]["added"] for p in (alice, bob)]
        assert added == [["my-ft"], []]
    database = Database(store_of(tmp_path / "data", database_url))
    try:
        owners = database.db.execute("SELECT owner, count(*) FROM conversations GROUP BY owner")
        assert [tuple(row) for row in owners] == [(1, 2)]
    finally:
        database.close()


# -- personal API tokens and each person's sessions ---------------------------------------------


def in_database(data_dir: Path, database_url: str, query: str) -> list[tuple]:
    database = Database(store_of(data_dir, database_url))
    try:
        return [tuple(row) for row in database.db.execute(query)]
    finally:
        database.close()


def test_a_persons_token_names_them_on_the_api_and_on_v1(home, llm):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    alices, _ = talk(alice, llm, "pierogi"), talk(bob, llm, "bigos")
    assert alice.http.put("/api/memory", json={"text": "- Is a vegetarian\n"}).status_code == 200
    assert bob.http.put("/api/memory", json={"text": "- Lives in Gdańsk\n"}).status_code == 200
    token = new_token(alice)
    listed = home.http.get("/api/conversations", headers=bearer(token))
    assert [c["id"] for c in listed.json()] == [alices]
    llm.script(Reply(text="Try the beetroot soup."))
    client = client_of(home, api_key=token)
    answer = client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "What should I cook?"}]
    )
    assert answer.choices[0].message.content == "Try the beetroot soup."
    assert "Is a vegetarian" in system_prompt(llm) and "Gdańsk" not in system_prompt(llm)
    # The token is shown once: the list names it by its label, never with the token.
    tokens = alice.http.get("/api/tokens").json()
    assert [t["label"] for t in tokens] == ["laptop"] and token not in json.dumps(tokens)
    assert tokens[0]["last_used"] is not None
    assert bob.http.get("/api/tokens").json() == []


def test_the_single_access_token_still_names_no_one_on_v1(request, llm, pages, searxng, tmp_path):
    add_people(tmp_path / "data")
    env = chat_env(llm, tmp_path, pages, AUTH_TOKEN=TOKEN)
    with service_for(request, env, searxng.url) as service:
        alice = signed_in(service, "alice")
        assert (
            alice.http.put("/api/memory", json={"text": "- Is a vegetarian\n"}).status_code == 200
        )
        llm.script(Reply(text="Anything."))
        client_of(service, api_key=TOKEN).chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "What should I cook?"}]
        )
        assert "vegetarian" not in system_prompt(llm)
        assert service.http.get("/api/tokens", headers=bearer(TOKEN)).status_code == 401


def test_a_token_is_kept_only_as_its_digest(home, tmp_path, database_url):
    token = new_token(signed_in(home, "alice"))
    assert len(token) >= 43  # 256 bits of secrets.token_urlsafe
    rows = in_database(tmp_path / "data", database_url, "SELECT * FROM api_tokens")
    assert len(rows) == 1 and token not in json.dumps(rows)
    assert hashlib.sha256(token.encode()).hexdigest() in rows[0]


def test_a_token_can_make_no_other_token(home):
    token = new_token(signed_in(home, "alice"))
    refused = home.http.post("/api/tokens", json={"label": "more"}, headers=bearer(token))
    assert refused.status_code == 403
    assert home.http.get("/api/conversations", headers=bearer(token)).status_code == 200


def test_revoked_removed_and_disabled_persons_tokens_are_refused(home, tmp_path, database_url):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    revoked, kept, bobs = new_token(alice, "old"), new_token(alice, "new"), new_token(bob)
    old = next(t for t in alice.http.get("/api/tokens").json() if t["label"] == "old")
    assert alice.http.delete(f"/api/tokens/{old['id']}").status_code == 204
    assert [t["label"] for t in alice.http.get("/api/tokens").json()] == ["new"]
    with home.client() as client:
        assert client.get("/api/conversations", headers=bearer(revoked)).status_code == 401
        assert client.get("/api/conversations", headers=bearer(kept)).status_code == 200
        # Disabled: refused, and said so, while the person stays disabled.
        assert run_main(
            "users", "disable", "bob", searxng_url=NO_SEARXNG,
            DATA_DIR=str(tmp_path / "data"), DATABASE_URL=database_url,
        ).returncode == 0  # fmt: skip
        disabled = client.get("/api/conversations", headers=bearer(bobs))
        assert (disabled.status_code, disabled.json()) == (401, {"detail": "bob is disabled"})
        # Removed, by the admin: their tokens go with them.
        people = alice.http.get("/api/people").json()
        bob_id = next(p["id"] for p in people if p["name"] == "bob")
        assert alice.http.delete(f"/api/people/{bob_id}").status_code == 204
        assert in_database(tmp_path / "data", database_url, "SELECT * FROM api_tokens") != []
        assert in_database(
            tmp_path / "data", database_url, f"SELECT * FROM api_tokens WHERE person = {bob_id}"
        ) == []  # fmt: skip
        # The revoked and the removed person's tokens count as wrong tokens do.
        for token in (bobs, revoked, bobs, revoked, bobs):
            assert client.get("/api/conversations", headers=bearer(token)).status_code == 401
        limited = client.get("/api/conversations", headers=bearer(revoked))
        assert limited.status_code == 429 and "retry-after" in limited.headers
        # The right token still opens (others behind the same address are not locked out).
        assert client.get("/api/conversations", headers=bearer(kept)).status_code == 200


def test_the_sessions_list_shows_the_other_browser_and_ends_it(home):
    laptop, phone = signed_in(home, "alice"), signed_in(home, "alice")
    signed_in(home, "bob")
    sessions = laptop.http.get("/api/sessions").json()
    assert len(sessions) == 2 and [s["this_browser"] for s in sessions].count(True) == 1
    other = next(s for s in sessions if not s["this_browser"])
    assert other["created"] <= time.time() < other["expires"]
    # When each was last used: the phone not since it signed in, until it asks something.
    mine = next(s for s in sessions if s["this_browser"])
    assert other["last_used"] is None and used_lately(mine["last_used"])
    assert phone.http.get("/api/conversations").status_code == 200
    listed = {s["id"]: s for s in laptop.http.get("/api/sessions").json()}
    assert used_lately(listed[other["id"]]["last_used"])
    assert phone.http.get("/api/conversations").status_code == 200
    assert laptop.http.delete(f"/api/sessions/{other['id']}").status_code == 204
    assert phone.http.get("/api/conversations").status_code == 401
    assert laptop.http.get("/api/conversations").status_code == 200
    # All the others at once: this browser stays signed in.
    tablet = signed_in(home, "alice")
    assert laptop.http.delete("/api/sessions").json() == {"sessions": 1, "tokens": 0}
    assert tablet.http.get("/api/conversations").status_code == 401
    assert [s["this_browser"] for s in laptop.http.get("/api/sessions").json()] == [True]


def test_a_person_changes_their_own_password_and_their_other_browsers_are_signed_out(home):
    laptop, phone = signed_in(home, "alice"), signed_in(home, "alice")
    bob = signed_in(home, "bob")
    token = new_token(phone)
    newer = "alice's newer long password"

    def change(current: str, password: str) -> httpx.Response:
        return laptop.http.put("/api/password", json={"current": current, "password": password})

    wrong = change("not her password", newer)
    assert (wrong.status_code, wrong.json()) == (403, {"detail": "the current password is wrong"})
    short = change(PASSWORDS["alice"], "short")
    assert short.status_code == 400
    assert short.json() == {"detail": "a password has at least 8 characters"}
    assert phone.http.get("/api/conversations").status_code == 200  # nothing changed yet
    assert change(PASSWORDS["alice"], newer).json() == {"sessions": 1, "tokens": 0}
    assert phone.http.get("/api/conversations").status_code == 401
    assert laptop.http.get("/api/conversations").status_code == 200  # this browser stays
    assert bob.http.get("/api/conversations").status_code == 200
    # Tokens are revoked on their own (Account), or all at once with Sign out everywhere.
    assert home.http.get("/api/conversations", headers=bearer(token)).status_code == 200
    old = home.client().post("/api/session", json={"name": "alice", "password": PASSWORDS["alice"]})
    assert old.status_code == 401
    assert signed_in(home, "alice", newer).http.get("/api/conversations").status_code == 200
    # A token's request changes no password: a token outlives no revocation of the account.
    by_token = home.http.put(
        "/api/password", json={"current": newer, "password": "a third one"}, headers=bearer(token)
    )
    assert by_token.status_code == 403


def test_guessing_the_current_password_is_limited_as_the_sign_in_is(home):
    laptop = signed_in(home, "alice")
    answers = [
        laptop.http.put("/api/password", json={"current": f"guess {n}", "password": "x" * 12})
        for n in range(6)
    ]
    assert [a.status_code for a in answers] == [403] * 5 + [429]
    assert "retry-after" in answers[-1].headers
    # The right one still counts (a proxy's clients share its address), as at the sign-in.
    right = {"current": PASSWORDS["alice"], "password": "alice's newer long password"}
    assert laptop.http.put("/api/password", json=right).json() == {"sessions": 0, "tokens": 0}


def used_lately(stamp: str | None) -> bool:
    """Whether a "last used" says within the last minute (it is kept to the minute)."""
    return stamp is not None and time.time() - datetime.fromisoformat(stamp).timestamp() < 90


def test_signing_out_everywhere_ends_one_persons_sessions_and_tokens_only(home):
    laptop, phone = signed_in(home, "alice"), signed_in(home, "alice")
    bob = signed_in(home, "bob")
    alices, bobs = new_token(laptop), new_token(bob)
    assert laptop.http.delete("/api/access").json() == {"sessions": 2, "tokens": 1}
    for person in (laptop, phone):
        assert person.http.get("/api/conversations").status_code == 401
    assert home.http.get("/api/conversations", headers=bearer(alices)).status_code == 401
    assert bob.http.get("/api/conversations").status_code == 200
    assert home.http.get("/api/conversations", headers=bearer(bobs)).status_code == 200
    assert signed_in(home, "alice").http.get("/api/tokens").json() == []


def test_reset_access_ends_every_session_and_token_of_one_person(tmp_path):
    add_people(tmp_path / "data")
    database = Database(store_of(tmp_path / "data", ""))
    try:
        alice, bob = (database.user(name) for name in ("alice", "bob"))
        assert alice is not None and bob is not None
        for person, keys in ((alice, "ab"), (bob, "cd")):
            for key in keys:
                database.add_session(f"session-{key}", time.time() + 60, person.id)
                database.add_token(f"token-{key}", f"{key * 8}", person.id, key)
        ended = database.reset_access(alice.id)
        assert (ended.sessions, ended.tokens) == (2, 2)
        assert database.person_sessions(alice.id) == database.person_tokens(alice.id) == []
        assert len(database.person_sessions(bob.id)) == len(database.person_tokens(bob.id)) == 2
        assert database.token_owner("token-c") == bob and database.token_owner("token-a") is None
    finally:
        database.close()


@pytest.mark.socket  # the MCP SDK's client makes its own connections
def test_a_persons_token_opens_mcp_with_their_own_search_cache(home, brave):
    token = new_token(signed_in(home, "alice"))

    async def tools(token: str) -> list[str]:
        async with httpx2.AsyncClient(headers=bearer(token), timeout=60) as http:
            async with Client(streamable_http_client(f"{home.url}/mcp", http_client=http)) as c:
                return [tool.name for tool in (await c.list_tools()).tools]

    # On a loop of its own thread: a browser test before this one on the same worker leaves
    # Playwright's loop running on this one.
    with start_blocking_portal() as portal:
        assert "web_search" in portal.call(tools, token)
        assert portal.call(mcp_search, home, token, "pierogi ruskie")
        assert portal.call(mcp_search, home, token, "pierogi ruskie")  # from Alice's cache
        assert brave_queries(brave) == 1
        # Bob's token searches the same words: his own cache, so Brave is asked again.
        assert portal.call(mcp_search, home, new_token(signed_in(home, "bob")), "pierogi ruskie")
        assert brave_queries(brave) == 2
    refused = home.http.post("/mcp", json={}, headers=bearer("not-a-token-of-anyones"))
    assert refused.status_code == 401


@pytest.mark.parametrize("width", [1280, 390])  # a laptop's, a phone's
def test_the_account_makes_copies_and_revokes_a_token_shown_once(
    browser, llm, pages, searxng, tmp_path, request, width
):
    add_people(tmp_path / "data")
    with service_for(request, chat_env(llm, tmp_path, pages), searxng.url) as service:
        with signed_in_page(browser, service.url, "alice", width=width) as page:
            open_account(page, width)
            expect(page.locator("#account-sessions li")).to_have_count(1)
            expect(page.locator("#account-sessions")).to_contain_text("this browser")
            expect(page.locator("#account-sessions")).to_contain_text("last used")
            page.fill("#token-label", "Open WebUI")
            page.get_by_role("button", name="Make a token").click()
            token = page.locator("#token-value").inner_text()
            assert len(token) >= 43
            expect(page.locator("#token-shown")).to_contain_text("It will not be shown again")
            expect(page.locator("#token-shown")).to_contain_text("OPENAI_API_KEY")
            page.locator("#copy-token").click()
            expect(page.locator("#token-shown")).to_contain_text("Copied.")
            assert page.evaluate("navigator.clipboard.readText()") == token
            fits = "(d) => d.scrollWidth <= d.clientWidth"
            assert page.locator("#settings-dialog").evaluate(fits)
            bearer_ = {"Authorization": f"Bearer {token}"}
            assert service.http.get("/api/conversations", headers=bearer_).status_code == 200
            expect(page.locator("#account-tokens")).to_contain_text("Open WebUI")
            # Shown once: Settings opened again lists the token by its label only.
            page.keyboard.press("Escape")
            open_account(page, width)
            expect(page.locator("#account-tokens")).to_contain_text("Open WebUI")
            expect(page.locator("#token-shown")).to_be_hidden()
            assert token not in page.content()
            page.get_by_role("button", name="Revoke Open WebUI").click()
            expect(page.locator("#account-tokens")).to_contain_text("No token.")
            assert service.http.get("/api/conversations", headers=bearer_).status_code == 401
            # Only the page's first request, before signing in, was refused.
            assert [e for e in page.log.errors if "401" not in e] == []


@pytest.mark.parametrize("width", [1280, 390])  # a laptop's, a phone's
def test_the_account_changes_the_password_and_signs_the_other_browsers_out(
    browser, llm, pages, searxng, tmp_path, request, width
):
    add_people(tmp_path / "data")
    newer = "alice's newer long password"
    with service_for(request, chat_env(llm, tmp_path, pages), searxng.url) as service:
        phone = signed_in(service, "alice")
        with signed_in_page(browser, service.url, "alice", width=width) as page:
            open_account(page, width)
            expect(page.locator("#account-sessions li")).to_have_count(2)
            form = page.locator("#password-form")
            change = form.get_by_role("button", name="Change password")
            page.fill("#password-current", "not her password")
            page.fill("#password-new", newer)
            page.fill("#password-again", newer.replace("newer", "nwer"))
            change.click()
            expect(form.locator(".field-error")).to_have_text(
                "The two new passwords differ: type it the same twice."
            )
            page.fill("#password-again", newer)
            change.click()
            expect(form.locator(".field-error")).to_have_text("the current password is wrong")
            page.fill("#password-current", PASSWORDS["alice"])
            change.click()
            expect(form.locator(".saved")).to_have_text(
                "Password changed. 1 other session signed out."
            )
            expect(form.locator(".field-error")).to_have_text("")
            expect(page.locator("#password-current")).to_have_value("")
            expect(page.locator("#account-sessions li")).to_have_count(1)  # the phone's gone
            assert phone.http.get("/api/conversations").status_code == 401
            assert signed_in(service, "alice", newer).http.get("/api/conversations").is_success
            fits = "(d) => d.scrollWidth <= d.clientWidth"
            assert page.locator("#settings-dialog").evaluate(fits)
            # This browser stays signed in: a reload opens the page, not the sign-in.
            page.reload()
            expect(page.locator("body")).to_have_attribute("data-ready", "yes")
            expect(page.locator("#login-dialog")).to_be_hidden()


def open_account(page, width: int) -> None:
    """Settings → Account, through the ☰ menu on a phone's width."""
    if width < 600:
        page.locator("#open-sidebar").click()
    page.locator("#open-settings").click()
    page.get_by_role("tab", name="Account").click()
