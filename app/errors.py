"""The service's one exception root.

Every error the service raises on purpose derives from ``ServiceError`` and carries the
HTTP status the web layer answers with: one handler there maps them all
(docs/architecture.md, "Errors"). Errors of the libraries below (httpx, aiohttp, sqlite3)
are translated into a subclass once, where the layer that meets them calls the library.
"""


class ServiceError(Exception):
    """Something the service refuses or could not do; ``status`` is its HTTP answer."""

    status: int = 500
    headers: dict[str, str] | None = None
    """Headers of the answer besides its body (a Retry-After)."""
