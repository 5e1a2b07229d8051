"""Household mode (docs/household.md): who is asking (a trusted proxy's header, or a
person's session after signing in with name and password), and each person's own
conversations: another person's id answers exactly as a missing one. The single-user modes
are test_access's and every other module's."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from app.store.database import Database
from app.store.passwords import hash_password
from app.store.users import NewUser
from tests import page_actions
from tests.browser import open_page
from tests.chat_client import done, new_conversation, send
from tests.conftest import ChatService, chat_env, run_main, service_for, store_of, two_replicas
from tests.fakes.brave_api import SEARCH_PATH, FakeBrave
from tests.fakes.llm_server import Reply, ToolCall
from tests.research_model import QUESTION, article, plan_of, research_service, researcher
from tests.summaries import MEASURED, SMALL_CHAT, small_conversation, summary_reply

__all__ = ["article", "researcher"]  # fixtures, imported to be used here

PASSWORDS = {"alice": "alice's long password", "bob": "bob's long password"}
MISSING = "20260101-0123456789"
"""A conversation id no one has."""
NO_SEARXNG = "http://127.0.0.1:9"


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


def signed_in(service: ChatService, name: str) -> Person:
    client = service.client()
    answer = client.post("/api/session", json={"name": name, "password": PASSWORDS[name]})
    assert answer.status_code == 200, answer.text
    return Person(client)


def talk(person: Person, llm, text: str) -> str:
    """A conversation of that person's with one answered question."""
    llm.script(Reply(text=f"An answer about {text}."))
    conversation_id = new_conversation(person)
    assert done(send(person, conversation_id, text))["status"] == "complete"
    return conversation_id


@pytest.fixture
def home(request, llm, pages, searxng, brave, tmp_path, database_url) -> Iterator[ChatService]:
    """A service whose database holds Alice and Bob: household mode."""
    add_people(tmp_path / "data", database_url)
    env = chat_env(llm, tmp_path, pages, DATABASE_URL=database_url)
    with service_for(request, env, searxng.url) as service:
        yield service


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
        for name, password in [("alice", "not her password"), ("carol", "anything at all")] * 2:
            wrong = client.post("/api/session", json={"name": name, "password": password})
            assert (wrong.status_code, wrong.json()) == (401, {"detail": "wrong name or password"})
        for name in ("bob", "alice"):  # the fifth failure within 10 minutes, and on
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
        page = open_page(browser, service.url, ready=False)
        try:
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
        finally:
            page.context.close()


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


# -- each person's own search cache ------------------------------------------------------------


def searched(person: Person, llm, query: str) -> dict:
    """The search step of an answer that searched `query`, in a new conversation."""
    llm.script(Reply(tool_calls=[ToolCall("web_search", {"query": query})]), Reply(text="Nile."))
    conversation_id = new_conversation(person)
    assert done(send(person, conversation_id, f"Tell me: {query}?"))["status"] == "complete"
    messages = person.http.get(f"/api/conversations/{conversation_id}").json()["messages"]
    (step,) = [step for step in messages[-1]["activity"] if step["type"] == "search"]
    return step


def brave_queries(brave: FakeBrave) -> int:
    return len([r for r in brave.requests if r.path == SEARCH_PATH])


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


def test_a_shared_cache_tells_a_searchs_age_only_to_who_ran_it(
    request, llm, pages, searxng, brave, tmp_path
):
    add_people(tmp_path / "data")
    env = chat_env(llm, tmp_path, pages, SEARCH_CACHE_SHARED="1")
    with service_for(request, env, searxng.url) as home:
        alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
        first = searched(alice, llm, "longest river")
        bobs = searched(bob, llm, "longest river")
        assert brave_queries(brave) == 1  # served from the one cache
        assert "cached_age" not in bobs and bobs["results"] == first["results"]
        assert searched(alice, llm, "longest river")["cached_age"] >= 0


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
    add_people(tmp_path / "data", database_url)
    caplog.set_level(logging.INFO, logger="app.api.people")
    with service_for(request, env, searxng.url) as home:
        assert "household mode: 2 users" in caplog.text
        assert "2 conversations of the single-user mode are now alice's" in caplog.text
        assert "memory.md of the single-user mode is now alice's" in caplog.text
        alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
        assert {c["id"] for c in alice.http.get("/api/conversations").json()} == mine
        assert bob.http.get("/api/conversations").json() == []
        assert alice.http.get("/api/memory").json() == {"text": facts}
        assert bob.http.get("/api/memory").json() == {"text": ""}
        assert not (tmp_path / "data" / "memory.md").exists()
    database = Database(store_of(tmp_path / "data", database_url))
    try:
        owners = database.db.execute("SELECT owner, count(*) FROM conversations GROUP BY owner")
        assert [tuple(row) for row in owners] == [(1, 2)]
    finally:
        database.close()


# -- each person's share of the Brave plan -----------------------------------------------------

USED_UP_TODAY = "your share of today's searches is used up (1 of 1); ask alice"


@pytest.fixture
def limited(request, llm, pages, searxng, brave, tmp_path, database_url) -> Iterator[ChatService]:
    """Alice and Bob, each allowed one Brave query a day."""
    add_people(tmp_path / "data", database_url)
    env = chat_env(llm, tmp_path, pages, DATABASE_URL=database_url, SEARCH_USER_DAILY_LIMIT="1")
    with service_for(request, env, searxng.url) as service:
        yield service


def test_a_person_at_their_daily_limit_is_refused_before_brave_is_asked(limited, llm, brave):
    alice, bob = signed_in(limited, "alice"), signed_in(limited, "bob")
    assert "error" not in searched(alice, llm, "longest river")
    assert brave_queries(brave) == 1
    refused = searched(alice, llm, "highest peak")
    assert refused["error"] == f"search failed: {USED_UP_TODAY}"
    assert brave_queries(brave) == 1  # nothing sent
    assert USED_UP_TODAY in llm.requests[-1].body["messages"][-1]["content"]  # the model too
    # Her cached search costs nothing, so it is still hers; Bob's share is his own.
    assert searched(alice, llm, "longest river")["cached_age"] >= 0
    assert "error" not in searched(bob, llm, "highest peak")
    assert brave_queries(brave) == 2
    lab = alice.http.get("/api/lab/search", params={"q": "deepest lake"})
    assert (lab.status_code, lab.json()["detail"]) == (429, USED_UP_TODAY)
    assert brave_queries(brave) == 2
    assert bob.http.get("/api/search-share").json() == {
        "name": "bob",
        "daily": 1,
        "monthly": None,
        "own": {"daily": "default", "monthly": "default"},
        "today": 1,
        "month": 1,
    }


def test_an_admin_sets_a_persons_limits_and_sees_everyones_use(limited, llm, brave):
    alice, bob = signed_in(limited, "alice"), signed_in(limited, "bob")
    assert "error" not in searched(bob, llm, "longest river")
    set_bob = alice.http.put("/api/people/bob/limits", json={"daily": None, "monthly": 2})
    assert set_bob.status_code == 200, set_bob.text
    assert set_bob.json()["own"] == {"daily": None, "monthly": 2}
    assert "error" not in searched(bob, llm, "highest peak")  # no daily limit for him now
    assert searched(bob, llm, "deepest lake")["error"] == (
        "search failed: your share of this month's searches is used up (2 of 2); ask alice"
    )
    assert brave_queries(brave) == 2
    back = alice.http.put("/api/people/bob/limits", json={"daily": "default"}).json()
    assert (back["daily"], back["own"]["daily"], back["monthly"]) == (1, "default", 2)
    checks = {c["id"]: c for c in alice.http.get("/api/status?quick=1").json()["checks"]}
    assert checks["search-shares"]["detail"] == (
        "alice: today 0, this month 0; bob: today 2, this month 2 Brave queries"
    )
    assert checks["search-share"]["detail"].startswith("today 0 of 1 (default)")
    bobs = {c["id"]: c for c in bob.http.get("/api/status?quick=1").json()["checks"]}
    assert "search-shares" not in bobs and bobs["search-share"]["state"] == "warning"
    # Bob is no admin: the admin's routes are not there for him; bad values are refused.
    for answer in (
        bob.http.put("/api/people/bob/limits", json={"daily": 100}),
        bob.http.get("/api/people/alice/limits"),
        alice.http.put("/api/people/carol/limits", json={"daily": 1}),
    ):
        assert answer.status_code == 404
    for wrong in ({"daily": -1}, {"daily": "5"}, {"daily": True}, {"daily": 1.5}, {"weekly": 3}):
        assert alice.http.put("/api/people/bob/limits", json=wrong).status_code == 422
    assert alice.http.get("/api/people/bob/limits").json()["monthly"] == 2


def test_users_limit_sets_a_persons_own_share_and_list_shows_it(
    request, llm, pages, searxng, brave, tmp_path
):
    data = tmp_path / "data"
    add_people(data)
    env = {"DATA_DIR": str(data), "SEARCH_USER_MONTHLY_LIMIT": "50"}
    told = run_main("users", "limit", "bob", "--daily", "0", searxng_url=NO_SEARXNG, **env)
    assert told.returncode == 0, told.stderr
    assert told.stdout == "bob: today 0 of 0, this month 0 of 50 (default) Brave queries\n"
    for wrong in ("-1", "lots", "1.5"):
        refused = run_main("users", "limit", "bob", "--daily", wrong, searxng_url=NO_SEARXNG, **env)
        assert refused.returncode == 2 and "is not a whole number from 0" in refused.stderr
    nobody = run_main("users", "limit", "carol", "--daily", "3", searxng_url=NO_SEARXNG, **env)
    assert nobody.returncode == 1 and "no user named 'carol'" in nobody.stderr
    run_main("users", "limit", "alice", "--monthly", "none", searxng_url=NO_SEARXNG, **env)
    listed = run_main("users", "list", searxng_url=NO_SEARXNG, **env).stdout
    assert "today 0 of no limit (default), this month 0 of no limit Brave queries" in listed
    with service_for(request, chat_env(llm, tmp_path, pages), searxng.url) as home:
        bob = signed_in(home, "bob")
        assert searched(bob, llm, "longest river")["error"] == (
            "search failed: your share of today's searches is used up (0 of 0); ask alice"
        )
        assert brave_queries(brave) == 0


@pytest.mark.parametrize("value", ["-1", "ten", "2.5"])
def test_a_share_setting_that_is_not_a_whole_number_stops_the_start(tmp_path, value):
    started = run_main(
        "doctor",
        searxng_url=NO_SEARXNG,
        DATA_DIR=str(tmp_path / "data"),
        SEARCH_USER_DAILY_LIMIT=value,
    )
    assert started.returncode == 1
    assert "SEARCH_USER_DAILY_LIMIT must be" in started.stderr


def test_two_replicas_on_postgresql_share_the_last_query_of_a_share(
    llm, pages, searxng, brave, tmp_path, postgres_url
):
    add_people(tmp_path / "data", postgres_url)
    env = chat_env(llm, tmp_path, pages, DATABASE_URL=postgres_url, SEARCH_USER_DAILY_LIMIT="1")
    with two_replicas(env, searxng.url) as replicas:
        both = [signed_in(replica, "alice") for replica in replicas]
        with ThreadPoolExecutor(max_workers=2) as pool:
            asked = [
                pool.submit(p.http.get, "/api/lab/search", params={"q": f"river {n}"})
                for n, p in enumerate(both)
            ]
            answers = sorted(future.result().status_code for future in asked)
    assert answers == [200, 429]
    assert brave_queries(brave) == 1


def test_the_status_panel_shows_a_persons_own_use(
    browser, llm, pages, searxng, brave, tmp_path, request
):
    add_people(tmp_path / "data")
    env = chat_env(llm, tmp_path, pages, SEARCH_USER_DAILY_LIMIT="1")
    with service_for(request, env, searxng.url) as service:
        assert "error" not in searched(signed_in(service, "bob"), llm, "longest river")
        page = open_page(browser, service.url + "/#/status", ready=False)
        try:
            page.fill("#login-name", "bob")
            page.fill("#login-token", PASSWORDS["bob"])
            page.keyboard.press("Enter")
            mine = page.locator("#view-status .status-row[data-check='search-share']")
            expect(mine).to_contain_text("Your searches")
            expect(mine).to_contain_text("today 1 of 1 (default), this month 1 of no limit")
            expect(mine).to_have_attribute("data-state", "warning")
            assert page.locator("[data-check='search-shares']").count() == 0  # the admin's
        finally:
            page.context.close()


def test_a_research_run_stops_searching_when_the_persons_share_is_used_up(
    request, llm, pages, searxng, brave, tmp_path, researcher, article
):
    add_people(tmp_path / "data")
    with research_service(
        request, llm, pages, searxng.url, tmp_path, SEARCH_USER_DAILY_LIMIT="1"
    ) as service:
        alice = signed_in(service, "alice")
        researcher.plan = plan_of("pierogi boiling time", "pierogi dough", "pierogi history")
        conversation_id = new_conversation(alice)
        research = {"research": {"plan_seconds": 0.1}}
        answer = done(send(alice, conversation_id, QUESTION, **research))
        assert brave_queries(brave) == 1  # the second search was refused, the third not tried
        first_line = answer["text"].splitlines()[0]
        assert "cut short" in first_line and USED_UP_TODAY in first_line
        assert "Pierogi are filled dumplings [1]." in answer["text"]  # from the one search
