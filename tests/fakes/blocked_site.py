"""A search site that blocks this address, as key-free engines meet it in real traffic: a
Cloudflare CAPTCHA challenge (HTTP 403, ``Server: cloudflare``, the challenge page's token in
the body), which SearXNG recognises and suspends the engine for. A SearXNG engine of the
generic ``json_engine`` kind pointed at it stands for a key-free engine (duckduckgo,
mojeek) blocked by its site, without the internet.
"""

from __future__ import annotations

from tests.fakes.loopback import DispatchingHandler, LoopbackFake, LoopbackServer

CHALLENGE = (
    "<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
    '<form id="challenge-form" action="/search?__cf_chl_captcha_tk__=0a1b2c3d" method="POST">'
    "<noscript>Enable JavaScript and cookies to continue</noscript></form></body></html>"
)


class _Handler(DispatchingHandler):
    server: LoopbackServer[BlockedSite]
    server_version = "cloudflare"  # the one Server header, as Cloudflare sends it
    sys_version = ""

    def _dispatch(self) -> None:
        self.server.fake.requests.append(self.path)
        data = CHALLENGE.encode()
        self.send_response(403)
        self.send_header("Content-Type", "text/html; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class BlockedSite(LoopbackFake):
    """Answers every request with Cloudflare's CAPTCHA challenge; `requests` lists paths."""

    _handler_class = _Handler
    _thread_name = "blocked-site"

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []
