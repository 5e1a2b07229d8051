"""The Status panel: its API (free checks apart from the Brave query that costs a query of the
user's plan) and the panel on the page, on the real SearXNG and the fakes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from app import config
from app.search.embedded import EmbeddedSearxng, free_port
from tests.browser import opened
from tests.chat_client import new_conversation, send
from tests.conftest import ChatService, chat_env, on_socket, searxng_env
from tests.fakes.llm_server import FakeLLM, Reply, invalid_api_key, tools_unsupported
from tests.fakes.loopback import LoopbackFake, LoopbackHandler
from tests.page_actions import send as type_and_send
from tests.page_actions import wait_turn_end
from tests.upstream_engine import our_entry, rendered_with, upstream_entry

QUICK_IDS = [
    "searxng_reachable",
    "engine_loaded",
    "searxng_json",
    "brave_plan",
    "model_reachable",
    "model_chosen",
    "model_window",
]
CHECK_KEYS = {"id", "part", "name", "state", "detail", "fix"}


def status(service: ChatService, *, quick: bool = False) -> list[dict]:
    response = service.http.get("/api/status", params={"quick": "1"} if quick else None, timeout=60)
    assert response.status_code == 200, response.text
    checks = response.json()["checks"]
    assert all(set(check) == CHECK_KEYS for check in checks), checks
    return checks


def brave_status(service: ChatService) -> dict:
    response = service.http.post("/api/status/brave", json={}, timeout=60)
    assert response.status_code == 200, response.text
    [check] = response.json()["checks"]
    return check


def by_id(checks: list[dict]) -> dict[str, dict]:
    return {check["id"]: check for check in checks}


def chat_requests(llm: FakeLLM) -> list[dict]:
    return [r.body for r in llm.requests]


@pytest.fixture
def service(request, llm, searxng, tmp_path) -> Iterator[ChatService]:
    """Start a variant of the chat service, of the test's kind: service(searxng_url=...,
    **env)."""
    started: list[ChatService] = []

    def start(searxng_url: str = searxng.url, fake: FakeLLM = llm, **env: str) -> ChatService:
        env = chat_env(fake, tmp_path, **env)
        running = ChatService(env, searxng_url, socket=on_socket(request)).start()
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


class _NotSearxngHandler(LoopbackHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.server.fake.paths.append(self.path)
        status, kind, body = self.server.fake.answer(self.path.split("?")[0])
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class NotSearxng(LoopbackFake):
    """What SEARXNG_URL may point at by mistake: `html`, a web server answering its home
    page everywhere; `json_off`, a SearXNG whose search.formats lacks json (403, as
    searx/webapp.py answers a format it does not serve)."""

    _handler_class = _NotSearxngHandler
    _thread_name = "not-searxng"

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.paths: list[str] = []

    def answer(self, path: str) -> tuple[int, str, str]:
        html = "text/html; charset=utf-8"
        if self.mode == "html":
            return 200, html, "<!doctype html><title>My router</title><p>Welcome"
        if path == "/healthz":
            return 200, "text/plain", "OK"
        if path == "/config":
            engine = {
                "name": config.ENGINE_NAME,
                "shortcut": config.ENGINE_SHORTCUT,
                "enabled": True,
            }
            return 200, "application/json", json.dumps({"engines": [engine]})
        return 403, html, "<!doctype html><title>403 Forbidden</title><h1>Forbidden</h1>"


# -- the API -----------------------------------------------------------------------------------


def test_quick_status_is_all_ok_and_spends_nothing(chat, brave, llm):
    checks = status(chat, quick=True)
    assert [c["id"] for c in checks] == QUICK_IDS
    # The fake says nothing of its window (a hosted API does not either): that one warns.
    every_ok = dict.fromkeys(QUICK_IDS, "ok") | {"model_window": "warning"}
    assert {c["id"]: c["state"] for c in checks} == every_ok
    assert "unknown" in by_id(checks)["model_window"]["detail"]
    assert {c["part"] for c in checks} == {"searxng", "engine", "model"}
    assert "fake-model" in by_id(checks)["model_chosen"]["detail"]
    assert brave.requests == []  # no search ran: the Brave plan is untouched
    assert chat_requests(llm) == []  # nothing was generated


def test_full_status_asks_the_model_once_with_tools_and_brave_never(chat, brave, llm):
    checks = by_id(status(chat))
    assert checks["model_tools"]["state"] == "ok", checks["model_tools"]
    assert checks["model_tools"]["name"] == "tool calling accepted by fake-model"
    [request] = chat_requests(llm)
    assert request["model"] == "fake-model" and request["tools"]
    assert request["max_tokens"] <= 8
    assert brave.requests == []


def test_brave_check_spends_exactly_one_query(chat, brave, llm):
    check = brave_status(chat)
    assert (check["id"], check["part"], check["state"]) == ("brave_key", "engine", "ok"), check
    assert len(brave.requests) == 1
    assert brave.requests[0].headers.get("x-subscription-token") == "test-key"
    assert chat_requests(llm) == []


def test_brave_check_reports_brave_rejecting_the_key(service, fresh_searxng, brave):
    # A SearXNG of its own: the failure suspends the engine there for a while.
    running = service(searxng_url=fresh_searxng.url)
    brave.fail_next(422, "SUBSCRIPTION_TOKEN_INVALID")
    check = brave_status(running)
    assert check["state"] == "fail", check
    assert "SUBSCRIPTION_TOKEN_INVALID" in check["detail"]  # Brave's own words
    assert "BRAVE_API_KEY" in check["fix"]
    assert len(brave.requests) == 1


def test_a_dead_model_server_fails_its_check_with_a_fix(service, llm, brave):
    llm.clear()
    running = service(LLM_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    for quick in (True, False):
        checks = by_id(status(running, quick=quick))
        model = [c for c in checks.values() if c["part"] == "model"]
        assert [c["id"] for c in model] == ["model_reachable"]  # nothing further was tried
        assert model[0]["state"] == "fail"
        assert "LLM_BASE_URL" in model[0]["fix"]
        assert checks["searxng_reachable"]["state"] == "ok"
    assert chat_requests(llm) == []


def test_a_model_server_refusing_the_key_says_which_setting(service, tmp_path):
    with FakeLLM(models=["fake-model"], api_key="the-key") as guarded:
        running = service(fake=guarded, LLM_API_KEY="not-the-key")
        checks = by_id(status(running))
        assert guarded.requests == []  # no generation tried with a refused key
    check = checks["model_reachable"]
    assert check["state"] == "fail" and "401" in check["detail"], check
    assert "LLM_API_KEY" in check["fix"]


def test_a_dead_searxng_fails_without_an_error_page(service, brave):
    running = service(searxng_url=f"http://127.0.0.1:{free_port()}")
    checks = status(running)
    searxng = [c for c in checks if c["part"] in ("searxng", "engine")]
    assert [(c["id"], c["state"]) for c in searxng] == [("searxng_reachable", "fail")]
    assert "SEARXNG_URL" in searxng[0]["fix"]
    assert by_id(checks)["model_reachable"]["state"] == "ok"
    check = brave_status(running)
    assert check["state"] == "fail" and check["detail"].startswith("not checked")
    assert "SEARXNG_URL" in check["fix"]
    assert brave.requests == []


def test_status_names_searxngs_own_braveapi_in_place_of_ours(service, brave, tmp_path):
    """A SearXNG that runs upstream's braveapi beside ours: the panel names it and its fix,
    without a search."""
    rendered = rendered_with(tmp_path / "rendered", our_entry(), upstream_entry(brave))
    with EmbeddedSearxng("all", environ=searxng_env(brave), rendered=rendered) as both:
        checks = by_id(status(service(searxng_url=both.url), quick=True))
    assert checks["engine_loaded"]["state"] == "fail"
    assert (
        "SearXNG's own braveapi engine is active beside ours" in checks["engine_loaded"]["detail"]
    )
    assert "keep_only" in checks["engine_loaded"]["fix"]
    assert brave.requests == []


@pytest.mark.parametrize("mode", ["html", "json_off"])
def test_a_searxng_url_that_does_not_serve_json(service, brave, mode):
    with NotSearxng(mode) as fake:
        running = service(searxng_url=fake.url)
        checks = by_id(status(running, quick=True))
        brave_check = brave_status(running)
        asked = list(fake.paths)
    assert checks["searxng_json"]["state"] == "fail"
    if mode == "html":
        assert checks["engine_loaded"]["state"] == "fail"
        assert "SEARXNG_URL" in checks["engine_loaded"]["fix"]
    else:
        assert checks["engine_loaded"]["state"] == "ok"
        assert "search.formats" in checks["searxng_json"]["fix"]
    assert brave_check["state"] == "fail" and brave_check["detail"].startswith("not checked")
    assert not any(path.startswith("/search?") and "q=" in path for path in asked), asked
    assert brave.requests == []


@pytest.mark.parametrize(("n_ctx", "state"), [(4096, "warning"), (32768, "ok")])
def test_a_small_served_window_is_a_warning(service, n_ctx, state):
    with FakeLLM(models=["fake-model"], n_ctx=n_ctx) as small:
        running = service(fake=small)
        check = by_id(status(running, quick=True))["model_window"]
    assert check["state"] == state, check
    assert str(n_ctx) in check["detail"]
    if state == "warning":
        assert "num_ctx" in check["fix"] and "--ctx-size" in check["fix"]


# -- the page ----------------------------------------------------------------------------------


def rows(page) -> dict[str, str]:
    """check id -> state, of the rows the panel shows."""
    return page.eval_on_selector_all(
        "#view-status .status-row[data-check]",
        "nodes => Object.fromEntries(nodes.map(n => [n.dataset.check, n.dataset.state]))",
    )


def wait_checked(page) -> None:
    """Until the full run is shown: no row still checking, and Check again usable again."""
    page.wait_for_selector("#view-status .status-row[data-check='model_reachable']")
    page.wait_for_function(
        "() => !document.querySelector('#view-status [data-state=pending]')"
        " && !document.querySelector('#view-status .status-actions button').disabled"
    )


def screenshot(page, name: str) -> None:
    """For a person to look at (not compared by the test)."""
    page.screenshot(path=str(Path("/tmp") / name), full_page=True)


def test_status_view_shows_every_check(browser, service, brave):
    stated = FakeLLM(models=["fake-model", "fake-small"], n_ctx=32768)  # its window proven
    with stated:
        with opened(browser, service(fake=stated).url + "/#/status", height=1100) as page:
            check_every_row(page, brave)


def check_every_row(page, brave) -> None:
    """The panel with every check ok: each in words, no fix, the Brave plan untouched."""
    wait_checked(page)
    assert page.locator("#view-status").is_visible()
    heading = page.locator("#view-status h1").inner_text()
    assert heading == "Status: is everything connected?"
    assert rows(page) == dict.fromkeys([*QUICK_IDS, "model_tools"], "ok")
    labels = page.eval_on_selector_all(
        "#view-status .status-row .status-icon", "nodes => nodes.map(n => n.ariaLabel)"
    )
    assert set(labels) == {"ok"}  # the state in words, not colour alone
    assert page.locator("#view-status .status-fix").count() == 0  # no fix when all is ok
    screenshot(page, "status.png")
    assert brave.requests == []
    assert page.log.errors == [] and page.log.outside() == []


def test_brave_check_runs_only_on_its_button(browser, chat, brave):
    with opened(browser, chat.url + "/#/status") as page:
        wait_checked(page)
        page.get_by_role("button", name="Check again").click()
        wait_checked(page)
        assert "brave_key" not in rows(page)
        assert brave.requests == []  # neither opening nor checking again spent a query
        assert "one query of your Brave plan" in page.locator("#view-status").inner_text()
        page.get_by_role("button", name="Check the Brave key").click()
        page.wait_for_selector("#view-status [data-check='brave_key'][data-state='ok']")
        assert len(brave.requests) == 1
        page.get_by_role("button", name="Check again").click()
        wait_checked(page)
        assert rows(page)["brave_key"] == "ok"  # the last answer stays; no new query for it
        assert len(brave.requests) == 1
        assert page.log.errors == []


def test_rows_are_reached_with_the_keyboard(browser, chat):
    with opened(browser, chat.url + "/#/status") as page:
        wait_checked(page)
        page.get_by_role("button", name="Check again").focus()
        page.keyboard.press("Tab")
        focused = page.evaluate("() => document.activeElement.dataset.check")
        assert focused == "searxng_reachable"
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement.dataset.check") == "searxng_json"


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_a_dead_model_server_opens_the_status_view_by_itself(browser, service, brave, llm, dark):
    with FakeLLM(models=["fake-model"], n_ctx=4096) as small:
        healthy_but_small = service(fake=small)  # for the warning row in the screenshot
        running = service(LLM_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
        with opened(browser, running.url + "/", width=400, height=1500, dark=dark) as page:
            page.wait_for_selector("#view-status [data-check='model_reachable'][data-state='fail']")
            wait_checked(page)
            assert page.locator("#view-status").is_visible()
            assert page.locator("#view-chat").is_hidden()
            row = page.locator("#view-status [data-check='model_reachable']")
            assert "LLM_BASE_URL" in row.locator(".status-fix").inner_text()
            assert row.locator(".status-icon").get_attribute("aria-label") == "failed"
            overflow = page.evaluate(
                "() => { const v = document.querySelector('#view-status');"
                " return v.scrollWidth - v.clientWidth; }"
            )
            assert overflow <= 0  # usable at 400 px: nothing sticks out sideways
            screenshot(page, f"status-fail-{'dark' if dark else 'light'}.png")
            assert brave.requests == []
            assert page.log.outside() == []
        with opened(browser, healthy_but_small.url + "/#/status", height=1100, dark=dark) as page:
            wait_checked(page)
            assert rows(page)["model_window"] == "warning"
            fix = page.locator("#view-status [data-check='model_window'] .status-fix").inner_text()
            assert "num_ctx" in fix
            screenshot(page, f"status-warning-{'dark' if dark else 'light'}.png")


def test_the_sidebar_dots_follow_what_the_turns_meet(browser, service, brave):
    """Green, then red once an answer finds the model server gone, then green again once an
    answer comes: the dots say what the turns meet, not what the page load saw."""
    model_dot = "#status-dots .status-dot[title^='model server']"
    with FakeLLM(models=["fake-model"], n_ctx=32768) as model_server:  # its window proven
        port = int(model_server.url.rsplit(":", 1)[1])
        running = service(fake=model_server)
        with opened(browser, running.url + "/") as page:
            page.wait_for_selector("body[data-ready]", state="attached")
            expect(page.locator(model_dot)).to_have_class(re.compile(r"\bok\b"))
            model_server.stop()
            type_and_send(page, "Is it up?")
            wait_turn_end(page)
            expect(page.locator(".error-card")).to_be_visible()
            expect(page.locator(model_dot)).to_have_class(re.compile(r"\bfail\b"))
            model_server.start(port)
            model_server.script(Reply(text="It is."))
            type_and_send(page, "Is it up?")
            wait_turn_end(page)
            expect(page.locator(".message.assistant .answer").last).to_have_text("It is.")
            expect(page.locator(model_dot)).to_have_class(re.compile(r"\bok\b"))


def test_a_refused_key_is_what_open_status_shows_until_an_answer_comes(browser, chat, llm):
    """A server that lists its models without a key (llama-server does) passes every free
    check while it refuses each answer: the card's Open status must show the refusal, and
    an answer given later clears it."""
    with opened(browser, chat.url + "/") as page:
        page.wait_for_selector("body[data-ready]", state="attached")
        llm.script(invalid_api_key())
        type_and_send(page, "Hello?")
        wait_turn_end(page)
        page.locator(".error-card").get_by_role("button", name="Open status").click()
        wait_checked(page)
        assert rows(page)["model_key_refused"] == "fail"
        row = page.locator("#view-status [data-check='model_key_refused']")
        assert "LLM_API_KEY" in row.locator(".status-fix").inner_text()
        assert "fake-model" in row.locator(".status-detail").inner_text()
        expect(page.locator("#status-dots .status-dot[title^='model server']")).to_have_class(
            re.compile(r"\bfail\b")
        )
    llm.script(Reply(text="Hi."))
    assert send(chat, new_conversation(chat), "Hello again?")[-1]["type"] == "done"
    assert "model_key_refused" not in by_id(status(chat, quick=True))


def test_a_model_that_accepts_tools_again_is_said_to_be_still_withheld(chat, brave, llm):
    """The chat remembers a refusal; when the model takes tools now, Status says how to
    offer them again, and says nothing once that is done."""
    llm.script(tools_unsupported(), Reply(text="Without the web."))
    conversation_id = new_conversation(chat)
    send(chat, conversation_id, "Anything new?")
    checks = by_id(status(chat))
    assert checks["model_tools"]["state"] == "ok"  # the fake takes tools this time
    remembered = checks["model_tool_refusal"]
    assert remembered["state"] == "warning" and "does not support tools" in remembered["detail"]
    assert "Try tools again" in remembered["fix"]
    cleared = chat.http.delete("/api/models/tool-refusals/fake-model")
    assert cleared.status_code == 204
    assert "model_tool_refusal" not in by_id(status(chat))
