"""Each person's share of the Brave plan (docs/household.md): limits a day and a month,
from the settings, `users limit` and the admin's API; a search beyond the share refused
before anything reaches Brave, in the words the person and the model both see, on the
page, the search lab, /v1 and a research run; two replicas on one PostgreSQL sharing
the last query."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from anyio.from_thread import start_blocking_portal
from playwright.sync_api import expect

from tests.chat_client import done, new_conversation, send
from tests.conftest import NO_SEARXNG, ChatService, chat_env, run_main, service_for, two_replicas
from tests.fakes.llm_server import Reply, ToolCall
from tests.people import (
    add_people,
    bearer,
    brave_queries,
    mcp_search,
    mcp_web_search,
    new_token,
    person_id,
    searched,
    signed_in,
    signed_in_page,
)
from tests.research_model import QUESTION, article, plan_of, research_service, researcher

__all__ = ["article", "researcher"]  # fixtures, imported to be used here

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
        "text": "today 1 of 1 (default) · this month 1, no limit (default) Brave queries",
    }


def test_a_persons_token_spends_their_share_on_v1(limited, llm, brave):
    """/v1 with Bob's personal token searches as Bob: his share, not the household's."""
    bob = signed_in(limited, "bob")
    token = new_token(bob)
    assert "error" not in searched(bob, llm, "longest river")  # his one query of the day
    llm.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "highest peak"})]),
        Reply(text="Everest, I believe."),
    )
    question = {"model": "fake-model", "messages": [{"role": "user", "content": "Highest?"}]}
    with limited.client(headers=bearer(token)) as client:
        answer = client.post("/v1/chat/completions", json=question)
    assert answer.status_code == 200, answer.text
    assert brave_queries(brave) == 1  # nothing sent for him
    assert USED_UP_TODAY in llm.requests[-1].body["messages"][-1]["content"]  # the model knows
    alice = signed_in(limited, "alice")  # hers is untouched
    assert "error" not in searched(alice, llm, "highest peak")


@pytest.mark.socket  # the MCP SDK's client makes its own connections
def test_a_persons_token_spends_their_share_through_mcp(limited, brave):
    token = new_token(signed_in(limited, "bob"))
    # On a loop of its own thread: Playwright's may be running on this one.
    with start_blocking_portal() as portal:
        assert portal.call(mcp_search, limited, token, "longest river")
        refused = portal.call(mcp_web_search, limited, token, "highest peak")
    assert refused.is_error and USED_UP_TODAY in refused.content[0].text
    assert brave_queries(brave) == 1  # nothing sent for his second
    assert limited.http.get("/api/search-share", headers=bearer(token)).json()["today"] == 1
    alice = signed_in(limited, "alice")
    assert alice.http.get("/api/search-share").json()["today"] == 0  # his, not hers


def test_an_admin_sets_a_persons_limits_and_sees_everyones_use(limited, llm, brave):
    alice, bob = signed_in(limited, "alice"), signed_in(limited, "bob")
    bobs_share, alices_share = (
        f"/api/people/{person_id(alice, n)}/limits" for n in ("bob", "alice")
    )
    assert "error" not in searched(bob, llm, "longest river")
    set_bob = alice.http.put(bobs_share, json={"daily": None, "monthly": 2})
    assert set_bob.status_code == 200, set_bob.text
    assert set_bob.json()["own"] == {"daily": None, "monthly": 2}
    assert "error" not in searched(bob, llm, "highest peak")  # no daily limit for him now
    assert searched(bob, llm, "deepest lake")["error"] == (
        "search failed: your share of this month's searches is used up (2 of 2); ask alice"
    )
    assert brave_queries(brave) == 2
    back = alice.http.put(bobs_share, json={"daily": "default"}).json()
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
        bob.http.put(bobs_share, json={"daily": 100}),
        bob.http.get(alices_share),
        alice.http.put("/api/people/99/limits", json={"daily": 1}),
    ):
        assert answer.status_code == 404
    for wrong in ({"daily": -1}, {"daily": "5"}, {"daily": True}, {"daily": 1.5}, {"weekly": 3}):
        assert alice.http.put(bobs_share, json=wrong).status_code == 422
    assert alice.http.get(bobs_share).json()["monthly"] == 2


def test_users_limit_sets_a_persons_own_share_and_list_shows_it(
    request, llm, pages, searxng, brave, tmp_path
):
    data = tmp_path / "data"
    add_people(data)
    env = {"DATA_DIR": str(data), "SEARCH_USER_MONTHLY_LIMIT": "50"}
    told = run_main("users", "limit", "bob", "--daily", "0", searxng_url=NO_SEARXNG, **env)
    assert told.returncode == 0, told.stderr
    assert told.stdout == "bob: today 0 of 0 · this month 0 of 50 (default) Brave queries\n"
    for wrong in ("-1", "lots", "1.5"):
        refused = run_main("users", "limit", "bob", "--daily", wrong, searxng_url=NO_SEARXNG, **env)
        assert refused.returncode == 2 and "is not a whole number from 0" in refused.stderr
    nobody = run_main("users", "limit", "carol", "--daily", "3", searxng_url=NO_SEARXNG, **env)
    assert nobody.returncode == 1 and "no user named 'carol'" in nobody.stderr
    run_main("users", "limit", "alice", "--monthly", "none", searxng_url=NO_SEARXNG, **env)
    listed = run_main("users", "list", searxng_url=NO_SEARXNG, **env).stdout
    assert "today 0, no limit (default) · this month 0, no limit Brave queries" in listed
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
        with signed_in_page(browser, service.url + "/#/status", "bob") as page:
            mine = page.locator("#view-status .status-row[data-check='search-share']")
            expect(mine).to_contain_text("Your searches")
            expect(mine).to_contain_text("today 1 of 1 (default) · this month 1, no limit")
            expect(mine).to_have_attribute("data-state", "warning")
            assert page.locator("[data-check='search-shares']").count() == 0  # the admin's


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
