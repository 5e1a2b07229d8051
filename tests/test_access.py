"""Only our own page and the user's scripts can drive the service, and bad input gets a
clear 4xx before any handler sees it (issue 7: DNS rebinding, cross-site forms, tokens,
size, depth and Unicode limits, unknown fields, damaged files)."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
from collections.abc import Iterator

import pytest
from starlette.websockets import WebSocket, WebSocketDisconnect

from app.api.access import FAILURES_ALLOWED, MAX_BODY_BYTES, FailureLimiter
from app.api.json_shape import MAX_JSON_DEPTH
from tests.browser import opened, page_server
from tests.chat_client import get_conversation, new_conversation, send
from tests.conftest import ChatService, chat_env, service_for
from tests.fakes.llm_server import Reply, invalid_api_key

JSON = {"content-type": "application/json"}


def conversations(chat) -> list[dict]:
    return chat.http.get("/api/conversations").json()


# -- hosts, origins, content types -----------------------------------------------------------


@pytest.mark.socket  # Host as sent on the wire
@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8080", "127.0.0.1.nip.io"])
def test_a_rebinding_host_is_refused_before_any_handler(chat, host):
    response = chat.http.get("/api/memory", headers={"Host": host})
    assert response.status_code == 421
    assert "ALLOWED_HOSTS" in response.json()["detail"]
    created = chat.http.post("/api/conversations", json={}, headers={"Host": host}).status_code
    assert created == 421
    assert conversations(chat) == []


@pytest.mark.socket  # Host as sent on the wire
@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}, evil.example", "localhost:evil", "127.0.0.1:{port} evil", "localhost:1:2"],
)
def test_a_loopback_name_followed_by_anything_but_a_port_is_refused(chat, host):
    port = chat.url.rsplit(":", 1)[1]
    response = chat.http.get("/api/memory", headers={"Host": host.format(port=port)})
    assert response.status_code == 421


@pytest.mark.socket  # Host as sent on the wire
@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "LOCALHOST."])
def test_loopback_names_are_served_on_any_port(chat, host):
    port = chat.url.rsplit(":", 1)[1]
    assert chat.http.get("/api/memory", headers={"Host": f"{host}:{port}"}).is_success


def test_allowed_hosts_adds_a_lan_name(llm, searxng, tmp_path):
    llm.clear()
    env = chat_env(llm, tmp_path, ALLOWED_HOSTS="chat.lan, proxy.home:8443")
    service = ChatService(env, searxng.url).start()  # on a socket: Host as sent on the wire
    try:
        ok = [
            service.http.get("/healthz", headers={"Host": h}).status_code
            for h in ("chat.lan", "chat.lan:80", "proxy.home:8443", "proxy.home:9000", "other.lan")
        ]
        assert ok == [200, 200, 200, 421, 421]
    finally:
        service.stop()


@pytest.mark.socket  # Origin as a browser sends it
@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1:9"},  # another local port is another origin
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ],
)
def test_a_foreign_origin_changes_nothing(chat, headers):
    response = chat.http.post("/api/conversations", json={}, headers=headers)
    assert response.status_code == 403
    assert chat.http.put("/api/memory", json={"text": "x"}, headers=headers).status_code == 403
    assert conversations(chat) == []
    assert chat.http.get("/api/memory").json() == {"text": ""}


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ('{"title": "evil"}', "text/plain"),
        ("title=evil", "application/x-www-form-urlencoded"),
        (
            "--x\r\nContent-Disposition: form-data; name=title\r\n\r\nevil\r\n--x--",
            "multipart/form-data; boundary=x",
        ),
        ('{"title": "evil"}', None),
    ],
    ids=["text-plain", "form", "multipart", "no-type"],
)
def test_only_json_changes_anything(chat, content, kind):
    headers = {"content-type": kind} if kind else {}
    response = chat.http.post("/api/conversations", content=content, headers=headers)
    assert response.status_code == 415
    assert conversations(chat) == []


@pytest.mark.socket  # Origin as a browser sends it
def test_our_own_origin_is_welcome(chat):
    origin = chat.url
    response = chat.http.post(
        "/api/conversations",
        json={"title": "mine"},
        headers={"Origin": origin, "Sec-Fetch-Site": "same-origin"},
    )
    assert response.status_code == 201


@pytest.mark.socket  # a preflight as a browser sends it
def test_no_cors_header_is_ever_sent(chat):
    preflight = chat.http.options(
        "/api/conversations",
        headers={
            "Origin": "http://evil.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status_code == 204
    assert set(preflight.headers["allow"].split(", ")) == {"GET", "POST", "OPTIONS"}
    chat_path = "/api/conversations/20260101-abcdef/chat"
    assert chat.http.options(chat_path).headers["allow"] == "OPTIONS, POST"
    for response in (
        preflight,
        chat.http.get("/api/config", headers={"Origin": "http://evil.example"}),
    ):
        assert not [h for h in response.headers if h.lower().startswith("access-control-")]


# -- the token -------------------------------------------------------------------------------


# Not ASCII: the token is compared as bytes, whatever the client sends.
TOKEN = "s3cret-tøken-4f9a2c7e1b8d6053a9e1"


@pytest.fixture
def auth_token() -> str:
    """The token of this module's `guarded` service."""
    return TOKEN


def raw_get(url: str, authorization: bytes) -> int:
    """A request with an Authorization header of arbitrary bytes (httpx would refuse some)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(
            b"GET /api/config HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
            + authorization
            + b"\r\nConnection: close\r\n\r\n"
        )
        return int(sock.recv(64).split(b" ")[1])


@pytest.mark.socket  # raw bytes on the socket
def test_the_token_is_compared_as_bytes_and_never_crashes(guarded):
    right = f"Bearer {TOKEN}".encode()
    assert raw_get(guarded.url, right) == 200
    for wrong in (b"Bearer s3cret", "Bearer jäger".encode(), b"Bearer \xff\xfe", b"Basic x", b""):
        assert raw_get(guarded.url, wrong) == 401, wrong
    health = guarded.http.get("/healthz").json()  # open without the token
    assert (health["status"], health["search"]) == ("ok", "ok")


def test_the_page_signs_in_with_a_cookie_and_signs_out(guarded):
    with guarded.client() as client:
        assert client.get("/api/session").json() == {"auth": True, "signed_in": False}
        assert client.get("/api/config").status_code == 401
        wrong = client.post("/api/session", json={"token": "nope"})
        assert wrong.status_code == 401
        signed = client.post("/api/session", json={"token": TOKEN})
        assert signed.status_code == 200
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Max-Age=" in cookie
        assert client.get("/api/config").status_code == 200
        assert client.get("/api/session").json() == {"auth": True, "signed_in": True}
        forged = guarded.http.get("/api/config", headers={"Cookie": "session=9999999999.abc"})
        assert forged.status_code == 401
        assert client.delete("/api/session").status_code == 204
        assert client.get("/api/config").status_code == 401


def test_repeated_wrong_tokens_are_slowed(guarded):
    """Five wrong tokens are each answered 401, however sent (a header, the sign-in form);
    beyond them the address waits."""
    for n in range(FAILURES_ALLOWED):
        if n % 2:
            wrong = guarded.http.get("/api/config", headers={"Authorization": "Bearer wrong"})
        else:
            wrong = guarded.http.post("/api/session", json={"token": "wrong"})
        assert wrong.status_code == 401
    blocked = guarded.http.get("/api/config", headers={"Authorization": "Bearer wrong"})
    assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) > 0
    assert guarded.http.post("/api/session", json={"token": "wrong"}).status_code == 429
    # The right token still works: the owner shares the address of whoever guessed.
    right = {"Authorization": f"Bearer {TOKEN}".encode()}
    assert guarded.http.get("/api/config", headers=right).status_code == 200
    login = guarded.http.post("/api/session", json={"token": TOKEN})
    assert login.status_code == 200


def session_cookie(response) -> dict[str, str]:
    """The session cookie a sign-in set, as a browser would send it back."""
    found = re.search(r"session=([^;]+)", response.headers["set-cookie"])
    assert found is not None
    return {"Cookie": f"session={found[1]}"}


def test_signing_out_ends_the_session_on_every_replica(llm, searxng, tmp_path, database_url):
    """Two replicas on one database: a cookie signed out on one is refused by the other
    (a copy of the cookie, kept by whoever saw it, no longer opens anything)."""
    env = chat_env(llm, tmp_path, AUTH_TOKEN=TOKEN, DATABASE_URL=database_url)
    first = ChatService(env, searxng.url, socket=False).start()
    second = ChatService(env, searxng.url, socket=False).start()
    try:
        cookie = session_cookie(first.http.post("/api/session", json={"token": TOKEN}))
        assert second.http.get("/api/config", headers=cookie).status_code == 200
        assert second.http.delete("/api/session", headers=cookie).status_code == 204
        assert first.http.get("/api/config", headers=cookie).status_code == 401
        assert second.http.get("/api/config", headers=cookie).status_code == 401
        state = first.http.get("/api/session", headers=cookie).json()
        assert state == {"auth": True, "signed_in": False}
        # Signing in again works, on either replica.
        again = session_cookie(second.http.post("/api/session", json={"token": TOKEN}))
        assert first.http.get("/api/config", headers=again).status_code == 200
    finally:
        first.stop()
        second.stop()


@pytest.mark.socket  # X-Forwarded-Proto as a proxy sends it, believed by uvicorn
@pytest.mark.parametrize(("trusted", "secure"), [("127.0.0.1", True), ("", False)])
def test_the_cookie_is_secure_behind_a_trusted_https_proxy_only(
    request, llm, searxng, tmp_path, trusted, secure
):
    env = chat_env(llm, tmp_path, AUTH_TOKEN=TOKEN, TRUSTED_PROXIES=trusted)
    with service_for(request, env, searxng.url) as service:
        forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "192.0.2.7"}
        signed = service.http.post("/api/session", json={"token": TOKEN}, headers=forwarded)
        assert signed.status_code == 200
        assert ("; secure" in signed.headers["set-cookie"].lower()) is secure
        out = service.http.delete("/api/session", headers={**forwarded, **session_cookie(signed)})
        assert ("; secure" in out.headers["set-cookie"].lower()) is secure


def test_healthz_tells_the_figures_only_to_the_token(guarded):
    """Anyone on the network may ask whether the service is up; how much the household
    searched (the Brave plan's figures) needs the token."""
    health = guarded.http.get("/healthz").json()
    assert set(health) == {"status", "search", "database"}
    assert health["status"] == "ok"
    bearer = {"Authorization": f"Bearer {TOKEN}".encode()}
    full = guarded.http.get("/healthz", headers=bearer).json()
    assert full["search_plan"]["queries_this_month"] == 0
    cookie = session_cookie(guarded.http.post("/api/session", json={"token": TOKEN}))
    assert "search_plan" in guarded.http.get("/healthz", headers=cookie).json()


def test_a_flood_of_other_clients_does_not_make_the_limit_forget_a_guesser():
    limiter = FailureLimiter()
    for _ in range(FAILURES_ALLOWED):
        limiter.fail("198.51.100.7")
    assert limiter.wait("198.51.100.7") > 0
    for n in range(3000):  # more clients than the table keeps, each failing once
        limiter.fail(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
    assert limiter.wait("198.51.100.7") > 0


def test_the_limit_counts_an_ipv6_guesser_by_its_64():
    """Each wrong token from a new address of the same /64 (2^64 of them) counts."""
    limiter = FailureLimiter()
    for n in range(FAILURES_ALLOWED):
        limiter.fail(f"2001:db8:1:2::{n + 1:x}")
    assert limiter.wait("2001:db8:1:2:ffff::9") > 0
    assert limiter.wait("2001:db8:1:3::1") == 0


def test_a_websocket_handshake_is_refused_before_any_route(chat):
    """No route of ours speaks WebSocket; one added later must not skip the checks."""

    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("reached the route")
        await websocket.close()

    chat.app.add_api_websocket_route("/api/echo", echo)
    with pytest.raises(WebSocketDisconnect) as refused:  # the in-process client's handshake
        with chat.in_process.websocket_connect("/api/echo", headers={"Origin": "http://e.example"}):
            pass
    assert refused.value.code == 1008


def test_the_page_asks_for_the_token_and_signs_out(browser, guarded, llm):
    with opened(browser, guarded.url, ready=False) as page:
        page.fill("#login-token", TOKEN)
        page.keyboard.press("Enter")
        page.wait_for_selector("body[data-ready]", state="attached")
        cookies = page.context.cookies()
        assert [c["httpOnly"] for c in cookies if c["name"] == "session"] == [True]
        assert page.evaluate("document.cookie") == ""  # no script can read it
        page.locator("#sign-out").click()
        page.wait_for_selector("#login-dialog[open]")


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/api/memory", {"text": "x\ud800y"}),
        ("POST", "/api/conversations", {"title": "a\udfffb"}),
        ("POST", "/api/conversations", {"settings": {"system_prompt": "\ud83d"}}),
        ("PUT", "/api/models", {"models": ["m\ud800"]}),
    ],
)
def test_lone_surrogates_are_refused_and_nothing_is_stored(chat, method, path, body):
    # json.dumps escapes them as JSON allows ("\ud800"); httpx's json= could not send them.
    response = chat.http.request(method, path, content=json.dumps(body), headers=JSON)
    assert response.status_code == 422
    assert "lone surrogate" in response.json()["detail"]
    assert conversations(chat) == [] and chat.http.get("/api/memory").json()["text"] == ""


def test_a_chat_message_with_a_lone_surrogate_is_refused_before_the_turn(chat, llm):
    conversation_id = new_conversation(chat)
    response = chat.http.post(
        f"/api/conversations/{conversation_id}/chat",
        content=json.dumps({"message": "hi \ud800"}),
        headers=JSON,
    )
    assert response.status_code == 422
    assert get_conversation(chat, conversation_id)["messages"] == []
    assert llm.requests == []


def test_brackets_and_escaped_quotes_inside_text_are_not_nesting(chat):
    """Only structure counts towards the depth limit: code or a quote pasted in a text
    (brackets, escaped quotes and backslashes) goes through."""
    text = 'print(d["k"]) # \\" [[[[[[[[[[[[[[[[[[[[ {{{{{{{{{{{{{{{{{{{{\n' * 50
    saved = chat.http.put("/api/memory", json={"text": text})
    assert saved.status_code == 200, saved.text
    assert chat.http.get("/api/memory").json()["text"] == text


def test_size_and_depth_limits_name_the_limit(chat):
    huge = {"text": "x" * (MAX_BODY_BYTES + 10)}
    too_big = chat.http.put("/api/memory", json=huge)
    assert too_big.status_code == 413 and f"{MAX_BODY_BYTES:,}" in too_big.json()["detail"]
    deep = "[" * 100_000 + "]" * 100_000
    nested = chat.http.put("/api/memory", content=deep, headers=JSON)
    assert nested.status_code == 422 and str(MAX_JSON_DEPTH) in nested.json()["detail"]
    long_prompt = chat.http.post(
        "/api/conversations", json={"settings": {"system_prompt": "x" * 60_000}}
    )
    assert long_prompt.status_code == 422
    assert "settings.system_prompt" in long_prompt.json()["detail"]
    assert "at most 50,000" in long_prompt.json()["detail"]
    many = chat.http.put("/api/models", json={"models": [f"m{i}" for i in range(201)]})
    assert many.status_code == 422 and "200" in many.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/api/memory", {"text": "x", "extra": 1}),
        ("PUT", "/api/models", {"models": [], "extra": 1}),
        ("POST", "/api/conversations", {"extra": 1}),
        ("POST", "/api/conversations", {"settings": {"extra": 1}}),
        ("POST", "/api/session", {"token": "x", "extra": 1}),
    ],
)
def test_unknown_fields_are_refused_by_name_everywhere(chat, method, path, body):
    response = chat.http.request(method, path, json=body)
    assert response.status_code == 422
    assert "unknown field" in response.json()["detail"] and "extra" in response.json()["detail"]


def test_unknown_fields_in_a_turn_are_refused(chat, llm):
    conversation_id = new_conversation(chat)
    base = f"/api/conversations/{conversation_id}"
    for path, body in (("chat", {"message": "hi", "temperature": 2}), ("regenerate", {"x": 1})):
        response = chat.http.post(f"{base}/{path}", json=body)
        assert response.status_code == 422, path
    assert llm.requests == []


def test_a_turn_may_only_use_a_model_of_the_picker(chat, llm):
    conversation_id = new_conversation(chat)
    url = f"/api/conversations/{conversation_id}"
    invented = chat.http.post(f"{url}/chat", json={"message": "hi", "model": "x" * 200})
    assert invented.status_code == 404 and "unknown model" in invented.json()["detail"]
    assert chat.http.patch(url, json={"settings": {"model": "nope"}}).status_code == 404
    assert llm.requests == [] and get_conversation(chat, conversation_id)["messages"] == []
    chat.http.put("/api/models", json={"models": ["my-own"]})
    llm.script(Reply(text="Answered by my own model."))
    events = send(chat, conversation_id, "hi", model="my-own")
    assert events[-1]["type"] == "done"


def test_an_id_with_a_trailing_newline_is_refused(chat):
    conversation_id = new_conversation(chat)
    response = chat.http.get(f"/api/conversations/{conversation_id}%0A")
    assert response.status_code == 422


# -- damaged data ----------------------------------------------------------------------------


def test_a_damaged_conversation_gives_a_clear_error_and_the_rest_works(chat, llm):
    good, bad = (new_conversation(chat) for _ in range(2))
    llm.script(Reply(text="Hello."), Reply(text="Hello."))
    for conversation_id in (good, bad):  # only a conversation with a message is listed
        assert send(chat, conversation_id, "hi")[-1]["type"] == "done"
    database = chat.settings.data_dir / "chat.db"
    with sqlite3.connect(database) as db:  # a hand edit gone wrong
        db.execute("UPDATE conversations SET settings = '{\"model\": ' WHERE id = ?", (bad,))
    response = chat.http.get(f"/api/conversations/{bad}")
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert bad in detail and str(database) in detail and "python -m app export" in detail
    chat_url = f"/api/conversations/{bad}/chat"
    for body in ({"message": "hi"}, {"message": "hi", "model": "fake-model"}):
        chat_response = chat.http.post(chat_url, json=body)
        assert chat_response.status_code == 409
        assert "settings damaged" in chat_response.json()["detail"]
    listed = {c["id"]: c for c in conversations(chat)}
    assert set(listed) == {good, bad}
    assert listed[bad]["damaged"] and "damaged" not in listed[good]
    assert chat.http.get(f"/api/conversations/{good}").status_code == 200


def test_a_turn_refused_on_damaged_data_leaves_the_conversation_free(chat, llm):
    """The turn's start takes the lease, adds the message, then reads the conversation:
    damage found there is a 409 and undoes it all (the message is not left in the log, and
    the next turn, once repaired, is not refused)."""
    conversation_id = new_conversation(chat)
    database = chat.settings.data_dir / "chat.db"
    with sqlite3.connect(database) as db:
        db.execute("UPDATE conversations SET totals = '{' WHERE id = ?", (conversation_id,))
    chat_url = f"/api/conversations/{conversation_id}/chat"
    response = chat.http.post(chat_url, json={"message": "hi", "model": "fake-model"})
    assert response.status_code == 409 and "damaged" in response.json()["detail"]
    with sqlite3.connect(database) as db:
        db.execute("UPDATE conversations SET totals = NULL WHERE id = ?", (conversation_id,))
    assert get_conversation(chat, conversation_id)["messages"] == []
    llm.script(Reply(text="Repaired."))
    assert send(chat, conversation_id, "hi again", model="fake-model")[-1]["type"] == "done"


def test_a_memory_file_that_is_not_utf8_is_named_and_never_overwritten(chat, llm):
    memory = chat.settings.data_dir / "memory.md"
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_bytes("- Użytkownik mieszka w Łodzi\n".encode("cp1250"))
    response = chat.http.get("/api/memory")
    assert response.status_code == 409 and "not UTF-8" in response.json()["detail"]
    llm.script(Reply(text="Still answering."))
    events = send(chat, new_conversation(chat), "hello")
    assert [e["type"] for e in events][-1] == "done"
    warning = next(e for e in events if e["type"] == "warning")
    assert "memory left out of this answer" in warning["message"]
    assert memory.read_bytes() == "- Użytkownik mieszka w Łodzi\n".encode("cp1250")
    assert chat.http.put("/api/memory", json={"text": "- fixed\n"}).status_code == 200


def test_a_failed_first_turn_takes_its_title_back_with_the_message(chat, llm):
    conversation_id = new_conversation(chat)
    llm.script(invalid_api_key())
    events = send(chat, conversation_id, "A question that will fail")
    assert events[-1]["restore"] == "A question that will fail"
    assert get_conversation(chat, conversation_id)["title"] == "New conversation"


# -- a hostile page in a real browser ----------------------------------------------------------

ATTACK_PAGE = """<!doctype html><title>cute cats</title>
<form id="f" method="POST" action="{target}/api/conversations" enctype="text/plain">
<input name='{{"title":"form","x":"' value='"}}'></form>
<script>
fetch("{target}/api/conversations", {{method: "POST", mode: "no-cors",
  headers: {{"Content-Type": "text/plain"}}, body: '{{"title": "no-cors"}}'}}).catch(() => {{}});
fetch("{target}/api/conversations", {{method: "POST",
  headers: {{"Content-Type": "application/json"}}, body: '{{"title": "cors"}}'}})
  .catch(() => {{}})
  .finally(() => {{ document.title = "sent"; document.getElementById("f").submit(); }});
</script>
"""


@pytest.fixture
def attacker(chat) -> Iterator[str]:
    """A page on another loopback origin (127.0.0.2) that tries to drive the service."""
    with page_server(ATTACK_PAGE.format(target=chat.url).encode()) as url:
        yield url


def test_a_page_from_another_origin_creates_nothing(browser, chat, attacker):
    with opened(browser, attacker, ready=False) as page:
        page.wait_for_url(f"{chat.url}/api/conversations")  # the form's navigation
        refusals = [
            (m, status) for m, url, status in page.log.responses if url.startswith(chat.url)
        ]
    # The form and the no-cors fetch reached the service and were refused (the fetch's
    # answer, same-origin by its Cross-Origin-Resource-Policy, never reaches the page); the
    # JSON fetch stopped at its preflight (answered without any CORS header): it never came.
    assert sorted(refusals) == [("POST", 403)]
    assert conversations(chat) == []
