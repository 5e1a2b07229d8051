"""Who may talk to the service, decided before any handler runs (docs/security.md).

A service on loopback is reachable from every web page the user visits, so:
- only known ``Host`` names are served (a DNS-rebinding page arrives under its own name):
  loopback names and addresses, plus ``ALLOWED_HOSTS``; anything else gets 421;
- every request must come from our own origin (``Origin`` and ``Sec-Fetch-Site``),
  whatever its method (a GET runs searches too), except a top-level navigation to the page
  itself; no answer may be embedded by another origin (``Cross-Origin-Resource-Policy``);
- a POST, PUT or PATCH body must be ``application/json``, which no HTML form can send and
  which a cross-site ``fetch`` cannot send without a CORS preflight that we never grant (no
  CORS header is ever sent): 403 or 415, and nothing changes;
- bodies are capped in size, in JSON nesting depth and in values before anything parses
  them, by a check that reads each byte once;
- with ``AUTH_TOKEN``, every ``/api`` and ``/v1`` call and the MCP server (``/mcp``) need
  the token, as ``Authorization: Bearer`` (scripts, MCP clients) or as the signed session
  cookie the page's login form gets; repeated wrong tokens from one client are refused for
  a while.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.api.json_shape import checked_shape
from app.api.openai_shapes import error_body
from app.api.people import PERSON, Household
from app.store.errors import Unavailable
from app.store.passwords import password_matches
from app.store.sessions import MAX_COOKIE_CHARS, ApiToken, CookieDigest
from app.store.storage import Storage
from app.store.users import User

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
AsgiMessage = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[AsgiMessage]]
Send = Callable[[AsgiMessage], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

Refusal = tuple[int, str, dict[str, str]]
"""An answer instead of the app's: its status, its message, its extra headers."""

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
PAGE_METHODS = frozenset({"GET", "HEAD"})
MAX_BODY_BYTES = 4 * 1024 * 1024
"""A message may be 200,000 characters, which JSON escapes (a surrogate pair, 12 bytes
for one character) can make twelve times longer."""
SESSION_COOKIE = "session"
SESSION_SECONDS = 30 * 24 * 3600
FAILURES_ALLOWED = 5
TOO_MANY_WRONG = "too many wrong tries: wait before trying again"
FAILURE_WINDOW_SECONDS = 600.0
TRACKED_CLIENTS = 1024
OPEN_PATHS = frozenset({"/api/session"})
"""The login itself, and the question "is a login needed?", need no token."""
OPENAI_PREFIX = "/v1"
MCP_PATH = "/mcp"
MCP_METHODS = frozenset({"GET", "POST", "DELETE"})
"""The MCP server's Streamable HTTP transport (app/api/mcp.py): not in the OpenAPI schema."""
TOKEN_PATHS = ("/api/", MCP_PATH)
"""What needs the token when AUTH_TOKEN is set: the API and the MCP server (and /v1)."""


def openai_path(path: str) -> bool:
    """The OpenAI-compatible endpoint's paths: their refusals have OpenAI's shape."""
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def guarded(path: str) -> bool:
    """Paths that need the token when AUTH_TOKEN is set."""
    return (path.startswith(TOKEN_PATHS) and path not in OPEN_PATHS) or openai_path(path)


HOST_HEADER = re.compile(
    r"(?:\[(?P<ip6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._-]+))(?::(?P<port>\d{1,5}))?"
)
"""A Host header as RFC 9110 allows it: a name or an address, and perhaps a port of
digits; nothing else may follow (``127.0.0.1:8080, evil.example`` is not a host)."""


def split_host(value: str) -> tuple[str, int | None]:
    """``host:port`` as sent in a Host header (``[::1]:8080`` for IPv6), lower-cased;
    ("", None) for anything that is not a host."""
    found = HOST_HEADER.fullmatch(value.strip().lower())
    if found is None:
        return "", None
    host = (found["ip6"] or found["name"]).rstrip(".")
    return host, int(found["port"]) if found["port"] else None


def host_allowed(host_header: str, allowed: frozenset[str]) -> bool:
    """Loopback names on any port (Docker publishes ours on a port of the user's choice;
    other local ports are told apart by Origin), ALLOWED_HOSTS entries as given."""
    host, port = split_host(host_header)
    if not host:
        return False
    if host in LOOPBACK_HOSTS or host in allowed:
        return True
    return port is not None and f"{host}:{port}" in allowed


class Sessions:
    """The page's sessions, kept in the database (app/store/sessions.py) so that signing
    out ends one on every replica. The cookie is 256 random bits; the database holds only
    its HMAC under a key derived from AUTH_TOKEN, so a copy of the database opens no
    session, and changing the token signs everyone out."""

    def __init__(self, token: str, storage: Storage) -> None:
        self.digest = CookieDigest(token)
        self.storage = storage

    def stored_key(self, cookie: str) -> str | None:
        """What the database holds for this cookie; None for one we cannot have made."""
        return self.digest.of(cookie)

    async def issue(self, person: int | None = None) -> str:
        """A new session: the token's, or in household mode a person's (users.rowid)."""
        cookie = secrets.token_urlsafe(32)
        key = self.stored_key(cookie)
        assert key is not None
        await self.storage.add_session(key, time.time() + SESSION_SECONDS, person)
        return cookie

    async def valid(self, cookie: str) -> bool:
        key = self.stored_key(cookie)
        return key is not None and await self.storage.session_live(key)

    async def person(self, cookie: str) -> User | None:
        """Household mode: whose live session this is (None: no person's, or disabled)."""
        key = self.stored_key(cookie)
        return None if key is None else await self.storage.session_user(key)

    async def end(self, cookie: str) -> None:
        if (key := self.stored_key(cookie)) is not None:
            await self.storage.end_session(key)


class ApiTokens:
    """Household mode's personal API tokens (docs/household.md): 256 random bits from
    `secrets`, shown to their person once; the database keeps only the token's SHA-256
    (random enough that no key is needed: a copy of the database opens nothing)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    @staticmethod
    def stored_key(token: bytes) -> str | None:
        """What the database holds for this token; None for one we cannot have made."""
        if not (token.isascii() and 0 < len(token) <= MAX_COOKIE_CHARS):
            return None
        return hashlib.sha256(token).hexdigest()

    async def issue(self, person: int, label: str) -> tuple[str, ApiToken]:
        """A new token of that person's: the token (to show once) and its listing."""
        token = secrets.token_urlsafe(32)
        key = self.stored_key(token.encode())
        assert key is not None
        return token, await self.storage.add_token(key, secrets.token_hex(8), person, label)

    async def owner(self, token: bytes) -> User | None:
        """Whose token this is, disabled or not (None: revoked, unknown, person removed)."""
        key = self.stored_key(token)
        return None if key is None else await self.storage.token_owner(key)


def client_key(address: str) -> str:
    """Whom the wrong-token limit counts: an IPv4 address, or an IPv6 address's /64 (one
    household or one server is given a whole /64, so counting its addresses one by one
    would give a guesser 2^64 fresh starts)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{ip}/64", strict=False))
    return str(ip)


class FailureLimiter:
    """Wrong tokens per client (``client_key``): after FAILURES_ALLOWED within the window,
    the client is refused until the window has passed since its last failure.

    Clients are kept in the order of their last failure; beyond TRACKED_CLIENTS only
    those whose last failure is older than the window are forgotten, so no flood of other
    clients can make the table forget one that is waiting (the table then grows by one
    entry, about 300 bytes, per IPv4 address or IPv6 /64 that failed in the last 10
    minutes: the attacker's cost, not ours)."""

    def __init__(self) -> None:
        self.failures: OrderedDict[str, list[float]] = OrderedDict()

    def wait(self, client: str, now: float | None = None) -> float:
        """Seconds this client must wait before trying again (0: it may try)."""
        now = now or time.monotonic()
        times = self.failures.get(client_key(client), [])
        recent = [t for t in times if now - t < FAILURE_WINDOW_SECONDS]
        if len(recent) < FAILURES_ALLOWED:
            return 0.0
        return FAILURE_WINDOW_SECONDS - (now - recent[-1])

    def fail(self, client: str, now: float | None = None) -> None:
        now = now or time.monotonic()
        key = client_key(client)
        times = [t for t in self.failures.pop(key, []) if now - t < FAILURE_WINDOW_SECONDS]
        self.failures[key] = [*times, now][-FAILURES_ALLOWED:]
        while len(self.failures) > TRACKED_CLIENTS:
            oldest, times = next(iter(self.failures.items()))
            if now - times[-1] < FAILURE_WINDOW_SECONDS:
                break  # every client left has failed within the window
            del self.failures[oldest]

    def forget(self, client: str) -> None:
        self.failures.pop(client_key(client), None)

    def wrong(self, client: str) -> float:
        """A wrong token, password or sign-in link from this client, the right one having
        been checked first (others behind the same address are not locked out): 0 with the
        failure counted, or the seconds it must still wait, the try then not counted."""
        wait = self.wait(client)
        if wait <= 0:
            self.fail(client)
        return wait


@dataclass
class Credentials:
    """What a request presented: a bearer token and/or a session cookie."""

    bearer: bytes | None
    cookie: str | None

    @classmethod
    def of(cls, headers: dict[bytes, bytes]) -> Credentials:
        authorization = headers.get(b"authorization")
        bearer = None
        if authorization is not None:
            scheme, _, value = authorization.partition(b" ")
            bearer = value.strip() if scheme.lower() == b"bearer" else b""
        return cls(bearer, cookie_value(headers.get(b"cookie", b""), SESSION_COOKIE))


def cookie_value(header: bytes, name: str) -> str | None:
    for part in header.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


class Guard:
    """What the checks need to remember: the allowed hosts, the token, the sessions it
    signs and the wrong tokens seen per client, and household mode's settings (None:
    off). One per app, shared with the login route."""

    def __init__(
        self,
        *,
        allowed_hosts: frozenset[str],
        token: str,
        storage: Storage,
        household: Household | None = None,
    ) -> None:
        self.allowed_hosts = allowed_hosts
        self.token = token.encode()
        self.household = household
        self.sessions = Sessions(token, storage) if token or household else None
        self.tokens = ApiTokens(storage) if household else None
        self.limiter = FailureLimiter()

    async def signed_in(self, given: Credentials, scope: Scope) -> bool:
        """A live session cookie or the right bearer token (no token needed: always). In
        household mode the cookie must be a person's, who is then the asker."""
        if self.sessions is None:
            return True
        if self.household is not None and given.cookie:
            if person := await self.sessions.person(given.cookie):
                scope.setdefault("state", {})[PERSON] = person
                return True
        elif given.cookie and await self.sessions.valid(given.cookie):
            return True
        token = bool(self.token) and given.bearer is not None
        return token and hmac.compare_digest(given.bearer or b"", self.token)

    async def token_person(self, given: Credentials) -> User | None:
        """Household mode: the person whose personal token the bearer token is, disabled
        or not (None: no person's, or not household mode)."""
        if self.tokens is None or not given.bearer:
            return None
        return await self.tokens.owner(given.bearer)

    async def check_token(self, headers: dict[bytes, bytes], scope: Scope) -> Refusal | None:
        """None when the request may go on; else (status, message, extra headers)."""
        if self.sessions is None:
            return None
        client = (scope.get("client") or ("unknown", 0))[0]
        given = Credentials.of(headers)
        # The right credential first: others' wrong tokens from the same address (every
        # client of a proxy shares one) must not lock the owner out. With 128 bits or
        # more, the wait below is not what stops guessing; it keeps the log quiet.
        if state_person(scope) is not None:  # named by the trusted proxy
            return None
        try:
            if await self.signed_in(given, scope):
                if given.bearer is not None:
                    self.limiter.forget(client)
                return None
            if (person := await self.token_person(given)) is not None:
                if person.disabled:  # refused, but not a wrong token: not counted
                    return 401, f"{person.name} is disabled", {}
                scope.setdefault("state", {}).update({PERSON: person, BY_TOKEN: True})
                self.limiter.forget(client)
                return None
        except Unavailable as exc:  # the sessions' database: said as every route says it
            return exc.status, str(exc), {}
        wait = self.limiter.wrong(client) if given.bearer is not None else self.limiter.wait(client)
        if wait > 0:
            return 429, TOO_MANY_WRONG, retry_after(wait)
        if given.bearer is not None:
            return 401, "wrong access token", {}
        if self.household is not None:
            return 401, "sign in with your name and password", {}
        return 401, "this service needs its access token (AUTH_TOKEN)", {}

    async def login(self, token: str, client: str) -> str | None:
        """A new session cookie for the right token; None if not (the caller counts it:
        `limiter.wrong`)."""
        if self.sessions is None:
            return None
        if hmac.compare_digest(token.encode(), self.token):
            self.limiter.forget(client)
            return await self.sessions.issue()
        return None

    async def sign_in(self, name: str, password: str, client: str) -> str | None:
        """Household mode: a new session cookie for that person's password; None (counted
        by the caller, as a wrong token is) for a wrong name or password or a disabled
        person, each after the same hashing work (0.1 s, in a thread)."""
        if self.household is None or self.sessions is None:
            return None
        person = await self.household.storage.user(name)
        stored = person.password if person is not None and not person.disabled else None
        if person is not None and await asyncio.to_thread(password_matches, stored, password):
            self.limiter.forget(client)
            return await self.sessions.issue(person.id)
        return None


class AccessControl:
    """The ASGI middleware in front of everything."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            # No route of ours speaks WebSocket, and none of the checks below was written
            # for one: a handshake is refused before anything of the app sees it.
            await refuse_unknown(scope, receive, send)
            return
        await self.http(scope, receive, with_safety_headers(send))

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        deny = refuse_openai if openai_path(scope["path"]) else refuse
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if not host_allowed(host, self.guard.allowed_hosts):
            await deny(
                send,
                421,
                f"this service does not answer for the host {host!r}; "
                "add it to ALLOWED_HOSTS if you reach the service by that name",
            )
            return
        method = scope["method"]
        if method == "OPTIONS":
            await options(scope, send)
            return
        if (reason := foreign(headers, scope, host)) and not top_level_page(scope, headers):
            await deny(send, 403, reason)
            return
        if (household := self.guard.household) is not None:
            needed = guarded(scope["path"]) or scope["path"] in OPEN_PATHS
            person = await household.from_proxy(scope, peer_of(scope), needed=needed)
            if isinstance(person, tuple):
                await deny(send, *person)
                return
            if person is not None:
                scope.setdefault("state", {})[PERSON] = person
        if guarded(scope["path"]):
            if (refusal := await self.guard.check_token(headers, scope)) is not None:
                await deny(send, *refusal)
                return
        if method in WITH_BODY and routed(scope):
            body = await read_body(receive, headers)
            if isinstance(body, tuple):
                await deny(send, *body)
                return
            media = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            # An empty body carries nothing to parse; anything else must be JSON.
            if (body or media) and media != b"application/json":
                await deny(send, 415, f"{method} requests must be application/json")
                return
            receive = replay(body, receive)
        await self.app(scope, receive, send)


BY_TOKEN = "by_token"
"""scope["state"][BY_TOKEN]: the asker was named by a personal API token (not signed in)."""


def by_token(scope: Scope) -> bool:
    return bool(scope.get("state", {}).get(BY_TOKEN))


def state_person(scope: Scope) -> User | None:
    person: User | None = scope.get("state", {}).get(PERSON)
    return person


PEER = "peer"
"""scope[PEER]: the address the connection came from, before X-Forwarded-For."""


def peer_of(scope: Scope) -> str:
    return str(scope.get(PEER) or (scope.get("client") or ("unknown", 0))[0])


class Forwarded:
    """uvicorn's X-Forwarded-For / X-Forwarded-Proto handling for TRUSTED_PROXIES, run
    here rather than by uvicorn so that the connection's own address is kept (scope[PEER]):
    AUTH_USER_HEADER is believed from a trusted proxy's connection only, never from a
    client a proxy forwarded."""

    def __init__(self, app: ASGIApp, trusted: tuple[str, ...]) -> None:
        self.app = ProxyHeadersMiddleware(app, trusted_hosts=list(trusted))  # type: ignore[arg-type]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            scope[PEER] = (scope.get("client") or ("unknown", 0))[0]
        await self.app(scope, receive, send)  # type: ignore[arg-type]


async def refuse_unknown(scope: Scope, receive: Receive, send: Send) -> None:
    """A scope the checks do not know: a WebSocket handshake is closed unanswered (the
    client sees 403), anything else is an error of the server that sent it."""
    if scope["type"] != "websocket":
        raise RuntimeError(f"refused an ASGI scope of type {scope['type']!r}")
    logger.warning("refused a WebSocket handshake to %s: no route speaks WebSocket", scope["path"])
    await receive()  # websocket.connect
    await send({"type": "websocket.close", "code": 1008})


def foreign(headers: dict[bytes, bytes], scope: Scope, host: str) -> str | None:
    """Why a request is not from our own page, or None if it is. Whatever the method: a
    GET runs searches, model requests and conversation searches too, and another page's
    <img> or no-cors fetch can send one (it cannot read the answer, but it pays for the
    work and can time it). A request a user makes (address bar, bookmark) says "none"."""
    site = headers.get(b"sec-fetch-site", b"").decode("latin-1").lower()
    if site and site not in ("same-origin", "none"):
        return f"refused a {site} request: only this service's own page may call it"
    origin = headers.get(b"origin")
    if origin is not None:
        own = f"{scope.get('scheme', 'http')}://{host}".lower()
        if origin.decode("latin-1").lower() != own:
            return "refused a request from another origin: only this service's page may call it"
    return None


def top_level_page(scope: Scope, headers: dict[bytes, bytes]) -> bool:
    """A link from another site to the page itself: loaded as a whole tab, never as an
    image, a script, a style or a frame of another page."""
    return (
        scope["path"] == "/"
        and scope["method"] in PAGE_METHODS
        and headers.get(b"sec-fetch-mode") == b"navigate"
        and headers.get(b"sec-fetch-dest") == b"document"
    )


SAFETY_HEADERS = (
    # No other origin may embed any answer of ours (an image, a script, a no-cors fetch),
    (b"cross-origin-resource-policy", b"same-origin"),
    # nor have a browser guess that a JSON answer is a script or a style.
    (b"x-content-type-options", b"nosniff"),
)


def with_safety_headers(send: Send) -> Send:
    """`send`, with SAFETY_HEADERS added to the response's headers (only to its start: a
    stream's events pass through untouched)."""

    async def sending(message: AsgiMessage) -> None:
        if message["type"] == "http.response.start":
            given = list(message.get("headers", []))
            names = {name.lower() for name, _ in given}
            message["headers"] = given + [h for h in SAFETY_HEADERS if h[0] not in names]
        await send(message)

    return sending


async def read_body(receive: Receive, headers: dict[bytes, bytes]) -> bytes | tuple[int, str]:
    """The whole body, or (status, message) when it is too big or nested too deep."""
    declared = headers.get(b"content-length", b"")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return 413, f"the body is larger than {MAX_BODY_BYTES:,} bytes"
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return 413, f"the body is larger than {MAX_BODY_BYTES:,} bytes"
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    if refusal := await checked_shape(body):
        return 422, refusal
    return body


def replay(body: bytes, receive: Receive) -> Receive:
    """The body once, then the real channel (a streaming turn listens on it for the
    client's hang-up, which is how Stop reaches the model server)."""
    sent = False

    async def wrapped() -> AsgiMessage:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return wrapped


def method_table(routers: Iterable[APIRouter]) -> list[tuple[re.Pattern[str], frozenset[str]]]:
    """Each API path (as a pattern) with its methods: what /openapi.json documents, read
    from the routers themselves (building the schema at every start cost 0.2 s)."""
    table = []
    for router in routers:
        for route in router.routes:
            if isinstance(route, APIRoute) and route.include_in_schema:
                pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(route.path))
                table.append((re.compile(f"^{pattern}$"), frozenset(route.methods or ())))
    return table


def route_methods(scope: Scope) -> set[str]:
    """The methods served at this path (empty: no such path)."""
    path = scope["path"]
    table = scope["app"].state.method_table  # built at start (factory.py's lifespan)
    methods = {m for pattern, ms in table if pattern.match(path) for m in ms}
    if path == "/" or path.startswith("/static/"):
        methods |= PAGE_METHODS
    if path == MCP_PATH:
        methods |= MCP_METHODS
    return methods


def routed(scope: Scope) -> bool:
    """A method the path serves: only then is its body worth reading (the app answers
    404 or 405 to the rest)."""
    return scope["method"] in route_methods(scope)


async def options(scope: Scope, send: Send) -> None:
    """What the path allows, and nothing else: no CORS header, so a browser's preflight
    for another origin fails."""
    methods = route_methods(scope)
    if not methods:
        await refuse(send, 404, "Not Found")
        return
    allow = ", ".join(sorted(methods | {"OPTIONS"})).encode()
    await send({"type": "http.response.start", "status": 204, "headers": [(b"allow", allow)]})
    await send({"type": "http.response.body", "body": b""})


def retry_after(seconds: float) -> dict[str, str]:
    return {"retry-after": str(max(1, round(seconds)))}


async def refuse(
    send: Send, status: int, message: str, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps({"detail": message}).encode()
    await answer(send, status, body, headers)


async def refuse_openai(
    send: Send, status: int, message: str, headers: dict[str, str] | None = None
) -> None:
    """`refuse` under /v1, in OpenAI's shape (a JSON shape refused there is 400, OpenAI's
    status for a bad request)."""
    status = 400 if status == 422 else status
    await answer(send, status, json.dumps(error_body(status, message)).encode(), headers)


async def answer(
    send: Send, status: int, body: bytes, headers: dict[str, str] | None = None
) -> None:
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
