"""TLS contexts, made once per CA bundle. Apart from app.transport on purpose: the commands
that use one without the service's transport (fetch, doctor, searxng) and those that use
neither (--help, export) start without aiohttp (a tenth of a second of imports)."""

from __future__ import annotations

import functools
import ssl


@functools.lru_cache(maxsize=2)
def tls_context(cafile: str) -> ssl.SSLContext:
    """Made once per CA bundle: loading one takes 10-20 ms of CPU, which a new client would
    otherwise spend on the event loop (the fetcher makes a client per hop)."""
    return ssl.create_default_context(cafile=cafile)
