"""The page and its files, under the page's own headers (docs/security.md), and /healthz."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from app.api.deps import ServicesDep
from app.api.lag import LagProbe

router = APIRouter()

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
# The page runs model output through a DOM renderer, never innerHTML; this policy is the
# second wall: no inline script or style, nothing loaded or sent beyond this origin.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class PageFiles(StaticFiles):
    """The page's scripts and styles, under the page's own headers. (Not an HTTP
    middleware: one of those would also sit in the path of every SSE event.)"""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(PAGE_HEADERS)
        return response


@router.get("/healthz")
async def healthz(request: Request, services: ServicesDep) -> dict[str, str | float]:
    """The service is up; whether its SearXNG answers too (nothing private). With
    LOOP_LAG_PROBE=1, also the event loop's worst lateness since the last call, and the
    same less the time the loop waited for a core (see app/api/lag.py)."""
    try:
        answer = await services.searxng.http.get("/healthz", timeout=2)
        search = "ok" if answer.status_code == 200 else "unhealthy"
    except httpx.HTTPError:
        search = "unreachable"
    health: dict[str, str | float] = {
        "status": "ok" if search == "ok" else "degraded",
        "search": search,
    }
    if services.settings.loop_lag_probe:
        lag: LagProbe = request.app.state.lag
        health["loop_lag_ms"], own = lag.take()
        if own is not None:
            health["loop_lag_own_ms"] = own
    return health


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)
