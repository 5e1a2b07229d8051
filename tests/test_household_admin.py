"""The household's admin (docs/household.md): the People routes and page section (list,
add, disable, enable, end sessions, remove with everything of theirs), refused to everyone
else as a path that does not exist; `python -m app users remove|reset`; and every person's
own "Export my conversations", which the admin never gets."""

from __future__ import annotations

import io
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from app.cli.exits import EXIT_REFUSED
from app.store.database import Database
from app.store.files import stored_token
from app.store.sessions import CookieDigest
from app.store.users import LINK
from tests import page_actions
from tests.browser import opened
from tests.chat_client import new_conversation, numbered
from tests.conftest import NO_SEARXNG, ChatService, chat_env, run_main, service_for, store_of
from tests.fakes.llm_server import Reply, ToolCall
from tests.people import (
    PASSWORDS,
    add_people,
    bearer,
    brave_queries,
    choose_password,
    home,
    new_token,
    person_id,
    searched,
    shared_home,
    signed_in,
    signed_in_page,
    talk,
)

CAROL = "carol's long password"

__all__ = ["home", "shared_home"]  # fixtures, imported to be used here


def test_an_admin_adds_disables_enables_resets_and_removes_a_person(home):
    alice = signed_in(home, "alice")
    added = alice.http.post("/api/people", json={"name": "carol", "password": CAROL})
    assert added.status_code == 201, added.text
    assert {k: added.json()[k] for k in ("name", "admin", "disabled", "signs_in")} == {
        "name": "carol",
        "admin": False,
        "disabled": False,
        "signs_in": "password",
    }
    proxied = alice.http.post("/api/people", json={"name": "dave", "admin": True}).json()
    assert (proxied["admin"], proxied["signs_in"]) == (True, "proxy")
    listed = alice.http.get("/api/people").json()
    assert [p["name"] for p in listed] == ["alice", "bob", "carol", "dave"]
    assert all("password" not in p for p in listed)
    taken = alice.http.post("/api/people", json={"name": "bob"})
    assert (taken.status_code, taken.json()) == (
        409,
        {"detail": "there is already a user named 'bob'"},
    )
    short = alice.http.post("/api/people", json={"name": "erin", "password": "short"})
    assert short.status_code == 400 and "at least 8 characters" in short.json()["detail"]

    carol = signed_in(home, "carol", CAROL)
    carols = person_id(alice, "carol")
    disabled = alice.http.patch(f"/api/people/{carols}", json={"disabled": True})
    assert disabled.status_code == 200 and disabled.json()["disabled"] is True
    assert carol.http.get("/api/conversations").status_code == 401  # her session ended
    again = home.http.post("/api/session", json={"name": "carol", "password": CAROL})
    assert again.status_code == 401
    assert alice.http.patch(f"/api/people/{carols}", json={"disabled": False}).status_code == 200
    carol = signed_in(home, "carol", CAROL)
    assert carol.http.get("/api/conversations").status_code == 200

    token = new_token(carol)
    assert alice.http.post(f"/api/people/{carols}/reset").status_code == 204
    assert carol.http.get("/api/conversations").status_code == 401
    assert home.http.get("/api/conversations", headers=bearer(token)).status_code == 401
    assert signed_in(home, "carol", CAROL).http.get("/api/conversations").status_code == 200

    assert alice.http.delete(f"/api/people/{carols}").status_code == 204
    assert [p["name"] for p in alice.http.get("/api/people").json()] == ["alice", "bob", "dave"]
    gone = home.http.post("/api/session", json={"name": "carol", "password": CAROL})
    assert gone.status_code == 401
    assert alice.http.delete(f"/api/people/{carols}").status_code == 404


def test_a_sign_in_link_signs_in_once_and_never_again(home):
    alice = signed_in(home, "alice")
    both = alice.http.post("/api/people", json={"name": "carol", "link": True, "password": CAROL})
    assert both.status_code == 400 and "not both" in both.json()["detail"]
    added = alice.http.post("/api/people", json={"name": "carol", "link": True})
    assert added.status_code == 201 and added.json()["signs_in"] == "proxy"  # no password yet
    token = added.json()["sign_in_link"].removeprefix("/#welcome=")
    assert len(token) >= 43
    with home.client() as carol:
        short = carol.post("/api/session", json={"link": token, "password": "short"})
        assert short.status_code == 400  # the link is kept for a better one
        first = carol.post("/api/session", json={"link": token, "password": CAROL})
        assert first.status_code == 200, first.text
        assert carol.get("/api/session").json()["person"] == "carol"
    again = home.http.post("/api/session", json={"link": token, "password": "another password"})
    assert (again.status_code, again.json()) == (
        401,
        {"detail": "this sign-in link was used already, has expired, or is not one"},
    )
    assert signed_in(home, "carol", CAROL).http.get("/api/conversations").status_code == 200
    # An unused link is ended with the person's sessions.
    dave = alice.http.post("/api/people", json={"name": "dave", "link": True}).json()
    assert alice.http.post(f"/api/people/{dave['id']}/reset").status_code == 204
    late = {"link": dave["sign_in_link"].removeprefix("/#welcome="), "password": "dave's own one"}
    assert home.http.post("/api/session", json=late).status_code == 401
    database = Database(store_of(home.settings.data_dir, home.settings.database_url))
    try:
        kept = [row[0] for row in database.db.execute("SELECT key FROM sessions")]
    finally:
        database.close()
    assert kept and not any(token in key for key in kept)  # only digests are kept


def test_a_new_sign_in_link_lets_someone_who_forgot_their_password_choose_another(home):
    alice = signed_in(home, "alice")
    bobs = person_id(alice, "bob")
    newer = "bob's newer long password"

    def link() -> str:
        made = alice.http.post(f"/api/people/{bobs}/link")
        assert made.status_code == 201, made.text
        return str(made.json()["sign_in_link"]).removeprefix("/#welcome=")

    earlier, latest = link(), link()
    # His password works until a link is used: a link asked by mistake locks no one out.
    assert signed_in(home, "bob").http.get("/api/conversations").status_code == 200
    stale = home.http.post("/api/session", json={"link": earlier, "password": newer})
    assert stale.status_code == 401  # one live link a person: the earlier stopped working
    with home.client() as bob:
        assert bob.post("/api/session", json={"link": latest, "password": newer}).is_success
        assert bob.get("/api/session").json()["person"] == "bob"
    old = home.http.post("/api/session", json={"name": "bob", "password": PASSWORDS["bob"]})
    assert old.status_code == 401
    assert signed_in(home, "bob", newer).http.get("/api/conversations").status_code == 200
    # Not for oneself (Account changes one's own password), nor for someone disabled.
    yours = alice.http.post(f"/api/people/{person_id(alice, 'alice')}/link")
    assert yours.status_code == 409 and "not yourself" in yours.json()["detail"]
    assert alice.http.patch(f"/api/people/{bobs}", json={"disabled": True}).is_success
    disabled = alice.http.post(f"/api/people/{bobs}/link")
    assert (disabled.status_code, disabled.json()) == (
        409,
        {"detail": "bob is disabled: enable them first"},
    )


def test_an_admin_makes_someone_an_admin_and_another_admin_no_longer_one(home):
    alice = signed_in(home, "alice")
    bobs, alices = person_id(alice, "bob"), person_id(alice, "alice")
    bob = signed_in(home, "bob")
    assert bob.http.get("/api/people").status_code == 404
    made = alice.http.patch(f"/api/people/{bobs}", json={"admin": True})
    assert made.json()["admin"] is True and made.json()["disabled"] is False
    assert bob.http.get("/api/session").json()["admin"] is True
    assert [p["name"] for p in bob.http.get("/api/people").json()] == ["alice", "bob"]
    # Bob, an admin now, makes Alice no longer one: the household keeps its admin, Bob.
    assert bob.http.patch(f"/api/people/{alices}", json={"admin": False}).json()["admin"] is False
    assert alice.http.get("/api/people").status_code == 404
    assert "admin" not in alice.http.get("/api/session").json()
    yourself = bob.http.patch(f"/api/people/{bobs}", json={"admin": False})
    assert yourself.status_code == 409 and "not yourself" in yourself.json()["detail"]
    nothing = bob.http.patch(f"/api/people/{alices}", json={})
    assert (nothing.status_code, nothing.json()) == (
        400,
        {"detail": "say what changes: disabled, admin or both"},
    )


ADMIN_ROUTES = [
    ("GET", "/api/people", None),
    ("POST", "/api/people", {"name": "mallory", "admin": True, "password": "mallory's own"}),
    ("PATCH", "/api/people/1", {"disabled": True}),
    ("POST", "/api/people/1/reset", None),
    ("POST", "/api/people/1/link", None),
    ("DELETE", "/api/people/1", None),
]


def test_anyone_but_an_admin_is_answered_as_for_a_path_that_does_not_exist(home):
    bob = signed_in(home, "bob")
    nowhere = bob.http.get("/api/nowhere")
    assert nowhere.status_code == 404
    for method, path, body in ADMIN_ROUTES:
        refused = bob.http.request(method, path, json=body)
        assert (refused.status_code, refused.json()) == (404, nowhere.json()), (method, path)
    alice = signed_in(home, "alice")
    assert [p["name"] for p in alice.http.get("/api/people").json()] == ["alice", "bob"]
    assert alice.http.get("/api/conversations").status_code == 200  # Alice still signed in


def test_the_last_admin_and_yourself_are_refused(home, tmp_path, database_url):
    alice = signed_in(home, "alice")
    for method, body in (("DELETE", None), ("PATCH", {"disabled": True})):
        refused = alice.http.request(method, "/api/people/1", json=body)
        assert refused.status_code == 409 and "not yourself" in refused.json()["detail"]
    removed = run_main(
        "users",
        "remove",
        "alice",
        "--yes",
        searxng_url=NO_SEARXNG,
        DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=database_url,
    )
    assert removed.returncode == EXIT_REFUSED
    assert "alice is the household's last admin" in removed.stderr
    assert alice.http.get("/api/people").status_code == 200


# -- removal leaves nothing of theirs ----------------------------------------------------------

PER_PERSON = {
    "conversations": "SELECT count(*) FROM conversations WHERE conversations.owner = ?",
    "messages": "SELECT count(*) FROM messages JOIN conversations ON "
    "conversations.rowid = messages.conversation WHERE conversations.owner = ?",
    "turn_versions": "SELECT count(*) FROM turn_versions JOIN conversations ON "
    "conversations.rowid = turn_versions.conversation WHERE conversations.owner = ?",
    "turn_runs": "SELECT count(*) FROM turn_runs JOIN conversations ON "
    "conversations.id = turn_runs.conversation WHERE conversations.owner = ?",
    "turn_events": "SELECT count(*) FROM turn_events JOIN conversations ON "
    "conversations.id = turn_events.conversation WHERE conversations.owner = ?",
    "sessions": "SELECT count(*) FROM sessions WHERE person = ?",
    "api_tokens": "SELECT count(*) FROM api_tokens WHERE person = ?",
    "search_limits": "SELECT count(*) FROM search_limits WHERE person = ?",
    "search_spent": "SELECT count(*) FROM search_spent WHERE person = ?",
    "added_models": "SELECT count(*) FROM added_models WHERE person = ?",
    "users": "SELECT count(*) FROM users WHERE rowid = ?",
}
"""Every table that holds a person's rows, counted for one person (the search cache is
counted whole: its keys are the search's business)."""


BY_CONVERSATION = [
    ("messages", "rowid"),
    ("turn_versions", "rowid"),
    ("turn_runs", "id"),
    ("turn_events", "id"),
    ("leases", "id"),
]
"""The tables whose rows belong to a conversation, and the conversations' column they name."""


def counts(service: ChatService, person: int) -> dict[str, int]:
    database = Database(store_of(service.settings.data_dir, service.settings.database_url))
    try:
        found = {t: int(database.scalar(q, (person,))) for t, q in PER_PERSON.items()}
        found["orphans"] = sum(
            int(
                database.scalar(
                    f"SELECT count(*) FROM {table} WHERE conversation NOT IN "
                    f"(SELECT {key} FROM conversations)"
                )
            )
            for table, key in BY_CONVERSATION
        )
        found["search_cache"] = int(database.scalar("SELECT count(*) FROM search_cache"))
        return found
    finally:
        database.close()


def test_removing_a_person_leaves_nothing_of_theirs_and_no_one_elses_changed(home, llm):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    for person, name in ((alice, "alice"), (bob, "bob")):
        conversation = talk(person, llm, f"{name}'s soup")
        llm.script(Reply(text="Another answer."))  # a regenerate: a version set aside
        regenerated = person.http.post(f"/api/conversations/{conversation}/regenerate", json={})
        assert regenerated.status_code == 200
        assert person.http.put("/api/memory", json={"text": f"- Is {name}\n"}).status_code == 200
        assert person.http.put("/api/models", json={"models": [f"{name}-ft"]}).status_code == 200
        new_token(person)
        limits = alice.http.put(f"/api/people/{person_id(alice, name)}/limits", json={"daily": 9})
        assert limits.status_code == 200, limits.text
    searched(alice, llm, "longest river")
    searched(bob, llm, "highest peak")
    before = {1: counts(home, 1), 2: counts(home, 2)}
    assert all(before[2][t] > 0 for t in PER_PERSON), before[2]
    assert before[1]["search_cache"] == 2
    memory = home.settings.data_dir / "memory"
    assert (memory / "2.md").exists()

    assert alice.http.delete("/api/people/2").status_code == 204

    after = {1: counts(home, 1), 2: counts(home, 2)}
    assert after[2] == dict.fromkeys(PER_PERSON, 0) | {"orphans": 0, "search_cache": 1}
    assert after[1] == before[1] | {"search_cache": 1}  # Alice's rows all there
    assert not (memory / "2.md").exists() and (memory / "1.md").exists()
    assert alice.http.get("/api/memory").json() == {"text": "- Is alice\n"}
    assert alice.http.get("/api/config").json()["models"]["added"] == ["alice-ft"]
    assert searched(alice, llm, "longest river")["cached_age"] >= 0  # her search still cached
    assert bob.http.get("/api/conversations").status_code == 401


def test_in_a_shared_cache_the_searches_a_removed_person_ran_go_with_them(shared_home, llm, brave):
    home = shared_home
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    searched(alice, llm, "longest river")
    searched(bob, llm, "highest peak")
    assert "cached_age" not in searched(bob, llm, "longest river")  # hers, shared
    assert counts(home, 1)["search_cache"] == 2
    assert alice.http.delete("/api/people/2").status_code == 204
    assert counts(home, 1)["search_cache"] == 1
    asked = len(brave.requests)
    assert "cached_age" not in searched(alice, llm, "highest peak")  # Bob's is gone
    assert len(brave.requests) == asked + 1
    assert searched(alice, llm, "longest river")["cached_age"] >= 0  # hers is kept


# -- the commands ------------------------------------------------------------------------------


def users(service: ChatService, *args: str, **env: str):
    return run_main(
        "users",
        *args,
        searxng_url=NO_SEARXNG,
        **{
            "DATA_DIR": str(service.settings.data_dir),
            "DATABASE_URL": service.settings.database_url,
            "AUTH_TOKEN": service.settings.auth_token,
            **env,
        },
    )


def test_the_command_gives_a_new_sign_in_link_as_people_does(home):
    newer = "bob's newer long password"
    made = users(home, "link", "bob")
    assert made.returncode == 0, made.stderr
    told, path = made.stdout.splitlines()
    assert told.startswith("a sign-in link for bob, once and within 24 hours")
    # Kept under the service's AUTH_TOKEN: made under another, it opens nothing.
    elsewhere = users(home, "link", "bob", AUTH_TOKEN="another-token-0123456789abcdef")
    foreign = elsewhere.stdout.splitlines()[-1].removeprefix("/#welcome=")
    refused = home.http.post("/api/session", json={"link": foreign, "password": newer})
    assert refused.status_code == 401
    made = users(home, "link", "bob")  # the one above ended this one's predecessor
    link = made.stdout.splitlines()[-1].removeprefix("/#welcome=")
    with home.client() as bob:
        assert bob.post("/api/session", json={"link": link, "password": newer}).is_success
        assert bob.get("/api/session").json()["person"] == "bob"
    assert signed_in(home, "bob", newer).http.get("/api/conversations").status_code == 200
    assert users(home, "disable", "bob").returncode == 0
    disabled = users(home, "link", "bob")
    assert (disabled.returncode, disabled.stderr) == (
        EXIT_REFUSED,
        "refused: bob is disabled: enable them first\n",
    )
    assert users(home, "link", "nobody").returncode == 1


def test_under_compose_the_link_is_keyed_with_the_token_the_service_made(home):
    """Compose without AUTH_TOKEN: serve keys sessions with the token it made and keeps in
    DATA_DIR, and so does `users link` (before that token exists it says to start first)."""
    data_dir = home.settings.data_dir
    compose = {"PUBLISHED_ON_LOOPBACK": "1", "AUTH_TOKEN": ""}
    early = users(home, "link", "bob", **compose)
    assert early.returncode == EXIT_REFUSED and "start it once" in early.stderr
    made, _ = stored_token(data_dir)
    link = users(home, "link", "bob", **compose).stdout.splitlines()[-1]
    database = Database(store_of(data_dir, home.settings.database_url))
    try:
        kept = [row[0] for row in database.db.execute("SELECT key FROM sessions")]
    finally:
        database.close()
    assert kept == [LINK + str(CookieDigest(made).of(link.removeprefix("/#welcome=")))]


def test_the_commands_reset_and_remove_a_person(home, llm, monkeypatch):
    bob = signed_in(home, "bob")
    talk(bob, llm, "bigos")
    reset = users(home, "reset", "bob")
    assert (reset.returncode, reset.stdout) == (
        0,
        "ended 1 sessions and revoked 0 API tokens of bob: they sign in anew\n",
    )
    assert bob.http.get("/api/conversations").status_code == 401
    assert users(home, "reset", "nobody").returncode == 1

    monkeypatch.setattr("sys.stdin", io.StringIO("alice\n"))
    mistyped = users(home, "remove", "bob")
    assert mistyped.returncode == EXIT_REFUSED
    assert "This removes bob, their 1 conversations" in mistyped.stderr
    assert "Export my conversations" in mistyped.stderr  # ask them to download theirs first
    signed_in(home, "bob")  # still there

    monkeypatch.setattr("sys.stdin", io.StringIO("bob\n"))
    removed = users(home, "remove", "bob")
    assert (removed.returncode, removed.stdout) == (0, "removed bob and their 1 conversations\n")
    gone = home.http.post("/api/session", json={"name": "bob", "password": PASSWORDS["bob"]})
    assert gone.status_code == 401
    assert users(home, "remove", "bob", "--yes").returncode == 1  # no one of that name


def test_the_command_makes_an_admin_and_keeps_the_households_last(home):
    bob = signed_in(home, "bob")
    assert bob.http.get("/api/people").status_code == 404
    made = users(home, "admin", "bob")
    assert (made.returncode, made.stdout) == (0, "bob is an admin: they may manage the people\n")
    assert bob.http.get("/api/people").status_code == 200  # at once, on his session
    off = users(home, "admin", "alice", "--off")
    assert (off.returncode, off.stdout) == (0, "alice is no longer an admin\n")
    last = users(home, "admin", "bob", "--off")
    assert last.returncode == EXIT_REFUSED
    assert "bob is the household's last admin: add another admin first" in last.stderr
    # Disabled, he would leave no one to manage it either.
    disabled = users(home, "disable", "bob")
    assert disabled.returncode == EXIT_REFUSED
    assert "bob is the household's last admin: add another admin first" in disabled.stderr
    assert bob.http.get("/api/people").status_code == 200
    assert users(home, "admin", "nobody").returncode == 1


# -- each person's own export -------------------------------------------------------------------


def test_each_person_downloads_their_own_conversations_only(home, llm):
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    talk(alice, llm, "pierogi")
    talk(bob, llm, "bigos")
    talk(bob, llm, "żurek")
    mine = bob.http.get("/api/export")
    assert mine.status_code == 200
    assert mine.headers["content-disposition"] == 'attachment; filename="conversations-bob.md"'
    assert "An answer about bigos." in mine.text and "An answer about żurek." in mine.text
    assert "pierogi" not in mine.text and mine.text.count("\n---\n") == 1
    hers = alice.http.get("/api/export").text
    assert "An answer about pierogi." in hers and "bigos" not in hers
    assert home.http.get("/api/export").status_code == 401  # no one signed in


# -- the page ---------------------------------------------------------------------------------


def settings(page, tab: str, narrow: bool = False) -> None:
    """Settings opened on that tab (on a phone the sidebar is a drawer, opened first)."""
    if narrow:
        page.locator("#open-sidebar").click()
    page.locator("#open-settings").click()
    page.get_by_role("tab", name=tab).click()


@contextmanager
def alice_at_people(
    request, browser, llm, pages, searxng, tmp_path, **options
) -> Iterator[tuple[ChatService, Page]]:
    """Alice and Bob's household served, and Alice signed in on a page (`opened` with
    `options`) open at Settings → People."""
    add_people(tmp_path / "data")
    with (
        service_for(request, chat_env(llm, tmp_path, pages), searxng.url) as service,
        signed_in_page(browser, service.url, "alice", **options) as alice,
    ):
        settings(alice, "People", narrow=options.get("width", 1280) < 600)
        yield service, alice


def test_two_people_in_two_browsers_and_only_the_admin_manages_them(
    browser, llm, pages, searxng, tmp_path, request
):
    add_people(tmp_path / "data")
    target = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)
    with (
        service_for(request, chat_env(llm, tmp_path, pages), searxng.url) as service,
        ExitStack() as stack,
    ):
        seen = {}
        for name, width in (("alice", 1280), ("bob", 390)):
            page = stack.enter_context(signed_in_page(browser, service.url, name, width=width))
            seen[name] = page
            llm.script(Reply(text=f"Hello, {name}."))
            page_actions.send(page, f"I am {name}")
            page_actions.wait_turn_end(page)
            settings(page, "Global", narrow=width < 720)
            page.fill("#memory-text", f"- Is {name}\n")
            page.locator("#save-memory").click()
            expect(page.locator("#settings-dialog")).to_contain_text("Memory saved.")
            page.keyboard.press("Escape")
        alice, bob = seen["alice"], seen["bob"]
        for name, page in seen.items():
            page.reload()
            expect(page.locator("body")).to_have_attribute("data-ready", "yes")
            expect(page.locator(".conversation-item")).to_have_count(1)
            expect(page.locator(".conversation-item")).to_contain_text(f"I am {name}")
            settings(page, "Global", narrow=page is bob)
            expect(page.locator("#memory-text")).to_have_value(f"- Is {name}\n")
            # This conversation, Global, Account; and People for the admin only.
            expect(page.get_by_role("tab")).to_have_count(4 if page is alice else 3)
        bob.screenshot(path=str(target / "people-not-an-admin-phone.png"))

        alice.get_by_role("tab", name="People").click()
        people = alice.locator("#people")
        row = people.locator(".person", has_text="bob")
        expect(row).to_contain_text("password")
        expect(people.locator(".person", has_text="alice")).to_contain_text("you")
        alice.fill("#person-name", "bob")
        alice.get_by_role("button", name="Add", exact=True).click()
        expect(alice.locator("#person-error")).to_have_text("there is already a user named 'bob'")
        alice.screenshot(path=str(target / "people.png"))

        # Remove asks for the name; Escape cancels and gives the focus back to the row.
        remove = row.get_by_role("button", name="Remove bob")
        remove.click()
        confirm = alice.locator("#people-remove")
        expect(confirm).to_contain_text("Export my conversations")
        expect(confirm.get_by_role("button", name="Remove bob")).to_be_disabled()
        alice.keyboard.type("bo")
        expect(confirm.get_by_role("button", name="Remove bob")).to_be_disabled()
        alice.keyboard.press("Escape")
        expect(confirm).to_be_hidden()
        expect(remove).to_be_focused()
        expect(alice.locator("#settings-dialog")).to_be_visible()

        # On a phone: the row and the question fit the screen, nothing scrolls sideways.
        alice.set_viewport_size({"width": 390, "height": 844})
        remove.click()
        expect(confirm).to_be_visible()
        for part in (".settings-head", ".settings-body"):
            fits = alice.locator(part).evaluate("node => node.scrollWidth <= node.clientWidth")
            assert fits, part
        expect(alice.get_by_role("tab", name="People")).to_be_in_viewport(ratio=1)
        alice.screenshot(path=str(target / "people-remove-phone.png"))
        alice.keyboard.press("Escape")
        expect(remove).to_be_focused()

        row.get_by_role("button", name="Disable bob").click()
        expect(row).to_contain_text("disabled")
        expect(row.get_by_role("button", name="Enable bob")).to_be_visible()
        bob.keyboard.press("Escape")
        bob.reload()
        expect(bob.locator("#login-dialog")).to_be_visible()  # his next request refused


def test_the_admin_sets_bobs_daily_share_on_the_people_tab_and_his_second_search_is_refused(
    browser, llm, pages, searxng, brave, tmp_path, request
):
    target = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)
    opened_at = (request, browser, llm, pages, searxng, tmp_path)
    with (
        alice_at_people(*opened_at, width=390, height=844) as (service, alice),
        ExitStack() as stack,
    ):
        people = alice.locator("#people")
        row, own = (people.locator(".person", has_text=n) for n in ("bob", "alice"))
        unlimited = "today 0, no limit (default) · this month 0, no limit (default)"
        expect(row.locator(".person-share")).to_have_text(f"{unlimited} Brave queries")
        expect(own.locator(".person-share")).to_have_text(f"{unlimited} Brave queries")
        expect(own.get_by_role("button", name="alice's limits")).to_be_enabled()

        # By keyboard: Limits, the daily choice, a number; a bad one is the server's to refuse.
        opener = row.get_by_role("button", name="bob's limits")
        opener.focus()
        alice.keyboard.press("Enter")
        form = row.get_by_role("form", name="bob's limits")
        daily = form.get_by_label("Daily limit")
        expect(daily).to_be_focused()
        daily.select_option("number")
        count = form.get_by_label("Daily Brave queries for bob")
        expect(count).to_be_focused()
        alice.keyboard.type("-1")
        alice.keyboard.press("Enter")
        expect(form.get_by_role("alert")).to_have_text(
            'daily: a limit is a whole number from 0, null (no limit) or "default"'
        )
        expect(count).to_have_value("-1")  # what was typed is kept, to be put right
        expect(row.locator(".person-share")).to_contain_text(unlimited)
        for part in (".settings-head", ".settings-body"):
            fits = alice.locator(part).evaluate("node => node.scrollWidth <= node.clientWidth")
            assert fits, part
        form.get_by_role("alert").scroll_into_view_if_needed()
        alice.screenshot(path=str(target / "people-limits-refused-phone.png"))
        count.fill("1")
        alice.keyboard.press("Enter")
        expect(form).to_be_hidden()
        expect(opener).to_be_focused()
        expect(row.locator(".person-share")).to_have_text(
            "today 0 of 1 · this month 0, no limit (default) Brave queries"
        )

        # a browser of his own
        bob = stack.enter_context(signed_in_page(browser, service.url, "bob"))
        for query in ("longest river", "highest peak"):
            llm.script(
                Reply(tool_calls=[ToolCall("web_search", {"query": query})]),
                Reply(text="Nile."),
            )
            page_actions.send(bob, f"Tell me: {query}?")
            page_actions.wait_turn_end(bob)
        assert brave_queries(brave) == 1  # the second was refused before Brave was asked
        trail = bob.locator(".trail").last
        trail.locator("summary").click()
        expect(trail.locator(".timeline")).to_contain_text(
            "search failed: your share of today's searches is used up (1 of 1); ask alice"
        )

        alice.get_by_role("tab", name="Global").click()
        alice.get_by_role("tab", name="People").click()
        expect(row.locator(".person-share")).to_contain_text("today 1 of 1 ·")
        alice.screenshot(path=str(target / "people-limits-phone.png"))


def test_a_new_person_opens_their_link_chooses_a_password_and_is_in(
    browser, llm, pages, searxng, tmp_path, request
):
    opened_at = (request, browser, llm, pages, searxng, tmp_path)
    with alice_at_people(*opened_at) as (_, alice):
        alice.fill("#person-name", "carol")
        alice.locator("#person-link").check()
        expect(alice.locator("#person-password")).to_be_disabled()
        alice.get_by_role("button", name="Add", exact=True).click()
        address = alice.locator("#person-link-address")
        expect(address).to_have_value(re.compile(r"/#welcome="))
        link = address.input_value()

        with opened(browser, link, width=390, ready=False) as carol:
            expect(carol.locator("#login-name-field")).to_be_hidden()
            choose_password(carol, CAROL)
            assert "welcome" not in carol.url  # the used link is out of the address bar
        with opened(browser, link, ready=False) as carol:  # the same link again, elsewhere
            carol.fill("#login-token", "another password")
            carol.keyboard.press("Enter")
            expect(carol.locator("#login-error")).to_have_text(
                "this sign-in link was used already, has expired, or is not one"
            )
            expect(carol.locator("body")).not_to_have_attribute("data-ready", "yes")


@pytest.mark.parametrize("width", [1280, 390])  # a laptop's, a phone's
def test_bob_forgot_his_password_the_admin_gives_him_a_new_link_and_he_is_in(
    browser, llm, pages, searxng, tmp_path, request, width
):
    newer = "bob's newer long password"
    opened_at = (request, browser, llm, pages, searxng, tmp_path)
    with alice_at_people(*opened_at, width=width) as (service, alice):
        alice.get_by_role("button", name="A new sign-in link for bob").click()
        given = alice.locator("#people .person .person-link")
        address = given.locator("input[readonly]")
        expect(address).to_have_value(re.compile(r"/#welcome="))
        expect(given).to_contain_text("Give bob this link")
        assert alice.locator("#settings-dialog").evaluate("d => d.scrollWidth <= d.clientWidth")
        link = address.input_value()

        with opened(browser, link, width=width, ready=False) as bob:
            choose_password(bob, newer)
        assert signed_in(service, "bob", newer).http.get("/api/conversations").is_success


def test_the_admin_makes_bob_an_admin_on_the_people_tab_and_he_finds_it(
    browser, llm, pages, searxng, tmp_path, request
):
    opened_at = (request, browser, llm, pages, searxng, tmp_path)
    with alice_at_people(*opened_at) as (service, alice):
        alice.get_by_role("button", name="Make bob an admin").click()
        row = alice.locator("#people .person").filter(has_text="bob")
        expect(row.locator(".person-marks")).to_contain_text("admin ·")
        expect(row.get_by_role("button", name="bob no longer an admin")).to_be_visible()
        with signed_in_page(browser, service.url, "bob") as bob:
            settings(bob, "People")
            expect(bob.locator("#people .person")).to_have_count(2)


@pytest.mark.socket  # Bob's client leaves his answer's stream, as a closed tab does
def test_removing_a_person_mid_answer_stops_it_and_leaves_nothing_of_theirs(home, llm, caplog):
    caplog.set_level(logging.INFO, logger="app.chat.outcome")
    alice, bob = signed_in(home, "alice"), signed_in(home, "bob")
    llm.script(Reply(text="on and on ", split=5, chunk_delay=0.05, endless=True))
    conversation = new_conversation(bob)
    path = f"/api/conversations/{conversation}/chat"
    with bob.http.stream("POST", path, json={"message": "Go on."}) as response:
        assert response.status_code == 200
        numbered(response, until=lambda event: event["type"] == "delta")

    assert alice.http.delete("/api/people/2").status_code == 204
    assert llm.wait_hung_up(timeout=10) is not None  # the model server's stream closed
    deadline = time.monotonic() + 10
    while "was removed; nothing kept" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.1)
    assert f"turn {conversation}: its conversation was removed; nothing kept" in caplog.text
    assert "failed" not in caplog.text  # no write tried again and again, no traceback
    left = counts(home, 2)
    assert left == dict.fromkeys(PER_PERSON, 0) | {"orphans": 0, "search_cache": 0}, left
