"""Real Chromium (Debian's package, found on PATH) driven by Playwright, for the page's tests.

Never ``playwright install``: it downloads browsers, and these machines reach no such host.
Every request the page makes is recorded, so a test can show that nothing left loopback.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from app.config import is_loopback

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch(playwright, executable: Path):
    return playwright.chromium.launch(
        executable_path=str(executable), headless=True, args=CHROMIUM_ARGS
    )


def is_loopback_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob", "about") or is_loopback(parts.hostname or "")


@dataclass
class PageLog:
    """What the page did that a user would not see: requests, dialogs, console errors."""

    requests: list[str] = field(default_factory=list)
    responses: list[tuple[str, str, int]] = field(default_factory=list)
    """(method, url, status) of each response the page got."""
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    """Each request's start, answer or failure, at its second since the page opened."""
    opened: float = field(default_factory=time.monotonic)

    def outside(self) -> list[str]:
        return [url for url in self.requests if not is_loopback_url(url)]

    def mark(self, what: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.opened:6.2f} s  {what}")

    def follow(self, page) -> None:
        """Record what the page does into this log."""
        page.on("request", self.sent)
        page.on("response", self.answered)
        page.on("requestfailed", lambda r: self.mark(f"failed {r.url}: {r.failure}"))
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))

    def sent(self, request) -> None:
        self.requests.append(request.url)
        self.mark(f"{request.method} {request.url}")

    def answered(self, response) -> None:
        self.responses.append((response.request.method, response.url, response.status))
        self.mark(f"{response.status} {response.url}")

    def unready(self, page) -> str:
        """Why a page never marked itself ready, as far as it shows: its text, its
        errors, and what its requests did when."""
        shown = page.evaluate("() => document.body.innerText.slice(0, 600)")
        return f"the page shows: {shown!r}\nerrors: {self.errors}\n" + "\n".join(self.timeline)


@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator:
    """One Chromium per test module: Playwright's sync API keeps an event loop running
    while it is open, and other modules' tests start their own with asyncio.run."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = launch(playwright, chromium)
        yield instance
        instance.close()


def open_page(
    browser, url: str, *, width: int = 1280, height: int = 860, dark: bool = False, ready=True
):
    """A fresh browser context on the service's page, with its log attached as `page.log`;
    with `ready`, once the page has wired itself up (it marks the body)."""
    context = browser.new_context(
        viewport={"width": width, "height": height},
        color_scheme="dark" if dark else "light",
        permissions=["clipboard-read", "clipboard-write"],
    )
    page = context.new_page()
    log = PageLog()
    log.follow(page)

    def on_dialog(dialog) -> None:
        log.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.log = log
    page.set_default_timeout(15_000)
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.goto(url)
        if ready:
            page.wait_for_selector("body[data-ready]", state="attached")
    except PlaywrightTimeout as exc:
        raise AssertionError(f"{url} did not get ready: {log.unready(page)}") from exc
    return page


@contextmanager
def opened(browser, url: str, **options) -> Iterator:
    """`open_page` with its keyword arguments, the page's context closed on leaving however
    the test ends (a failed assertion too): no test leaves a context open in the module's
    Chromium for the tests after it."""
    page = open_page(browser, url, **options)
    try:
        yield page
    finally:
        page.context.close()


@contextmanager
def page_server(page: bytes) -> Iterator[str]:
    """A web page on another loopback origin (127.0.0.2: another site)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.2:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
