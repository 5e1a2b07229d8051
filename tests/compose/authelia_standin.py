"""A stand-in for Authelia 4.38 (docker.io/authelia/authelia:4.38, which cannot be pulled
here), run by tests/compose/authelia.Dockerfile under that name for compose.authelia.yaml.

It follows Authelia's documentation of what nginx and a browser see
(https://www.authelia.com/integration/proxies/nginx/ and
https://www.authelia.com/reference/guides/proxy-authorization/, the AuthRequest
implementation, with the source of internal/handlers/handler_authz_impl_authrequest.go
at v4.38.8):

- `GET /api/authz/auth-request`, asked by nginx's auth_request with `X-Original-URL` and
  `X-Original-Method`: 200 with `Remote-User`, `Remote-Groups`, `Remote-Name` and
  `Remote-Email` when the request's session cookie is valid; 401 with `Location` set to the
  portal (the cookie's `authelia_url`) with `rd` (the original URL) and `rm` (its method)
  when not; 400 without those two headers.
- `POST /api/firstfactor` with `{"username", "password"}` (what the portal's sign-in form
  sends): 200 `{"status": "OK"}` and the session cookie when the password matches the
  user's Argon2 hash in the file backend's users_database.yml (a disabled user is refused),
  401 `{"status": "KO", ...}` otherwise.
- `GET /api/health`: 200 `{"status": "OK"}` (the image's healthcheck).

It reads /config/configuration.yml as Authelia does for what it uses: the session
cookie's name (default authelia_session), domain and authelia_url, and the file backend's
path. It differs: the access_control rules are not applied (every signed-in person is
allowed: the configuration's one rule allows them), there is no second factor, no portal
page (the portal's address answers a plain page), and sessions live in memory.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

import yaml
from argon2 import PasswordHasher
from argon2.exceptions import Argon2Error

CONFIG = Path("/config/configuration.yml")
PORT = 9091


@dataclass(frozen=True)
class Person:
    name: str
    display_name: str
    email: str
    groups: tuple[str, ...]
    password_hash: str
    disabled: bool


@dataclass(frozen=True)
class Settings:
    cookie_name: str
    cookie_domain: str
    portal: str
    users_file: Path


def settings() -> Settings:
    config = yaml.safe_load(CONFIG.read_text())
    cookie = config["session"]["cookies"][0]
    return Settings(
        cookie_name=cookie.get("name", "authelia_session"),
        cookie_domain=cookie["domain"],
        portal=cookie["authelia_url"],
        users_file=Path(config["authentication_backend"]["file"]["path"]),
    )


def people(users_file: Path) -> dict[str, Person]:
    """The file backend's users, read at each sign-in as Authelia's watch would."""
    users = yaml.safe_load(users_file.read_text())["users"]
    return {
        name: Person(
            name,
            entry.get("displayname", ""),
            entry.get("email", ""),
            tuple(entry.get("groups") or ()),
            entry["password"],
            bool(entry.get("disabled", False)),
        )
        for name, entry in users.items()
    }


SETTINGS = settings()
SESSIONS: dict[str, str] = {}
"""Each valid session cookie's value, and whose it is."""
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def signed_in(self) -> Person | None:
        for part in self.headers.get("Cookie", "").split(";"):
            key, _, value = part.strip().partition("=")
            if key == SETTINGS.cookie_name:
                with LOCK:
                    name = SESSIONS.get(value)
                person = people(SETTINGS.users_file).get(name or "")
                if person is not None and not person.disabled:
                    return person
        return None

    def do_GET(self) -> None:
        if self.path == "/api/health":
            self.answer(200, {"status": "OK"})
        elif self.path.startswith("/api/authz/auth-request"):
            self.auth_request()
        else:
            self.answer(200, {"status": "OK", "portal": "the sign-in page would be here"})

    def auth_request(self) -> None:
        url, method = self.headers.get("X-Original-URL"), self.headers.get("X-Original-Method")
        if not url or not method:
            self.answer(400, {"status": "KO", "message": "X-Original-URL and -Method needed"})
            return
        person = self.signed_in()
        if person is None:
            portal = f"{SETTINGS.portal}/?{urlencode({'rd': url, 'rm': method})}"
            self.answer(401, {"status": "KO"}, {"Location": portal})
            return
        self.answer(
            200,
            {"status": "OK"},
            {
                "Remote-User": person.name,
                "Remote-Groups": ",".join(person.groups),
                "Remote-Name": person.display_name,
                "Remote-Email": person.email,
            },
        )

    def do_POST(self) -> None:
        if self.path != "/api/firstfactor":
            self.answer(404, {"status": "KO"})
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        person = people(SETTINGS.users_file).get(str(body.get("username")))
        try:
            if person is None or person.disabled:
                raise Argon2Error
            PasswordHasher().verify(person.password_hash, str(body.get("password")))
        except Argon2Error:
            failed = "Authentication failed. Check your credentials."
            self.answer(401, {"status": "KO", "message": failed})
            return
        cookie = secrets.token_urlsafe(32)
        with LOCK:
            SESSIONS[cookie] = person.name
        set_cookie = (
            f"{SETTINGS.cookie_name}={cookie}; Domain={SETTINGS.cookie_domain}; Path=/; "
            "HttpOnly; Secure; SameSite=Lax"
        )
        self.answer(200, {"status": "OK"}, {"Set-Cookie": set_cookie})


if __name__ == "__main__":
    ThreadingHTTPServer(("0.0.0.0", PORT), Handler).serve_forever()  # noqa: S104 - in its container
