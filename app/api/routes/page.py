"""The page and its files, under the page's own headers (docs/security.md), and /healthz."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, NotRequired

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles
from typing_extensions import TypedDict

from app.api.bodies import REFUSALS
from app.api.deps import GuardDep, ServicesDep
from app.api.lag import LagProbe
from app.chat.services import Services
from app.search.failures import FailureView
from app.search.plan import PlanView
from app.store.errors import Unavailable

router = APIRouter(responses=REFUSALS)
SPENT_TIMEOUT = 1.0
"""Seconds /healthz waits for the database's count of searches before leaving it out."""

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


class DatabaseState(TypedDict):
    backend: str
    answers: bool


class SearchPlanState(TypedDict):
    """The Brave plan as its last answer stated it, what this service sent, what SearXNG
    suspended."""

    plan: PlanView | None
    rate_per_second: float
    queries_today: int | None
    queries_this_month: int | None
    suspended: list[FailureView]


class Health(TypedDict):
    status: str
    search: str
    database: DatabaseState
    search_plan: NotRequired[SearchPlanState]
    """With the token (when AUTH_TOKEN is set) only: how much the household searches."""
    loop_lag_ms: NotRequired[float]
    """LOOP_LAG_PROBE only: the event loop's worst lateness since the last call."""
    loop_lag_own_ms: NotRequired[float]


@router.get("/healthz")
async def healthz(request: Request, services: ServicesDep, guard: GuardDep) -> Health:
    """The service is up; whether its SearXNG answers too, and which database it uses and
    whether that answers: open to anyone, for health checks (Compose's, a proxy's). The
    figures (the Brave plan and the queries sent; with LOOP_LAG_PROBE=1 the event loop's
    worst lateness since the last call, see app/api/lag.py) only with the token, when
    AUTH_TOKEN is set: they say how much the household searches."""
    try:
        answer = await services.searxng.http.get("/healthz", timeout=2)
        search = "ok" if answer.status_code == 200 else "unhealthy"
    except httpx.HTTPError:
        search = "unreachable"
    database = await services.storage.ping()
    health: Health = {
        "status": "ok" if search == "ok" and database.answers else "degraded",
        "search": search,
        "database": {"backend": database.backend, "answers": database.answers},
    }
    if await guard.check_token(dict(request.scope["headers"]), request.scope) is not None:
        return health
    health["search_plan"] = await search_plan(services)
    if services.settings.loop_lag_probe:
        lag: LagProbe = request.app.state.lag
        health["loop_lag_ms"], own = lag.take()
        if own is not None:
            health["loop_lag_own_ms"] = own
    return health


async def search_plan(services: Services) -> SearchPlanState:
    """The Brave plan as its last answer stated it (None before one), the queries this
    service sent today and this month, and the engines SearXNG suspended: no search."""
    plan = await asyncio.to_thread(services.plan.read)
    try:  # a slow disk, or a database down, must not hold up the health check
        spent = await asyncio.wait_for(services.storage.searches_spent(), SPENT_TIMEOUT)
    except (TimeoutError, Unavailable):
        spent = None
    return {
        "plan": plan.as_dict() if plan else None,
        "rate_per_second": services.plan.plan_rate(),
        "queries_today": spent.today if spent else None,
        "queries_this_month": spent.month if spent else None,
        "suspended": [f.as_dict() for f in services.searxng.suspensions.current()],
    }


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)
