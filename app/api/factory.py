"""The chat service's HTTP API (docs/architecture.md): the app, wired. Each resource's
routes are a router of app/api/routes/; the turn itself is app.chat.turn.run_turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from app import config
from app.api import access, lab, openai_shapes
from app.api.answer_slots import AnswerSlots
from app.api.lag import LagProbe
from app.api.mcp import McpEndpoint
from app.api.people import household_mode
from app.api.routes import account, conversations, openai, page, session, shares, status, turns
from app.api.routes import household as household_routes
from app.api.routes import settings as settings_routes
from app.chat.services import Services
from app.chat.settings import presets
from app.errors import ServiceError
from app.model.client import ModelClient
from app.search.client import Searxng
from app.search.plan import PlanReader
from app.store.storage import Storage


def validation_message(exc: RequestValidationError) -> str:
    """One readable line per problem, naming the field: "settings.web_search: ..."."""
    lines = []
    for error in exc.errors():
        where = ".".join(
            str(part) for part in error["loc"] if part not in ("body", "query", "path")
        )
        if error["type"] == "extra_forbidden":
            lines.append(f"unknown field {where!r}")
        elif error["type"] == "string_too_long":  # said as a person counts, not as pydantic
            size, limit = len(error["input"]), error["ctx"]["max_length"]
            what = where or "text"
            lines.append(f"the {what} is {size:,} characters, at most {limit:,} are taken")
        elif error["type"] == "string_unicode":
            lines.append(f"{where}: contains a lone surrogate, which is not valid Unicode text")
        else:
            message = error["msg"].removeprefix("Value error, ")
            lines.append(f"{where}: {message}" if where else message)
    return "; ".join(lines)


def openai_path(request: Request) -> bool:
    """Under /v1 every error has OpenAI's shape, as its clients read it."""
    return access.openai_path(request.url.path)


async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    if openai_path(request):
        first = exc.errors()[0]["loc"] if exc.errors() else ()
        param = ".".join(str(p) for p in first if p != "body") or None
        body = openai_shapes.error_body(400, validation_message(exc), param)
        return JSONResponse(body, status_code=400)  # OpenAI's status for a bad field
    return JSONResponse({"detail": validation_message(exc)}, status_code=422)


async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
    """Every error the service raises on purpose, answered with its own status."""
    if openai_path(request):
        param, code = getattr(exc, "param", None), getattr(exc, "code", None)
        body = openai_shapes.error_body(exc.status, str(exc), param, code)
        return JSONResponse(body, status_code=exc.status, headers=exc.headers)
    return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=exc.headers)


async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """An unknown path or method: under /v1 as OpenAI words it ("Invalid URL (POST
    /v1/x)", an invalid_request_error: not a missing model), FastAPI's shape elsewhere."""
    headers = dict(exc.headers or {})
    if openai_path(request):
        asked = f"{request.method} {request.url.path}"
        message = f"Invalid URL ({asked})" if exc.status_code == 404 else str(exc.detail)
        if exc.status_code == 405:
            message = f"Invalid method ({asked}): this path takes {headers.get('allow', '')}"
        body = openai_shapes.error_body(exc.status_code, message)
        return JSONResponse(body, status_code=exc.status_code, headers=headers)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)


FIRST = (page, session, lab, status)
"""The routers served before the page's static files, then those after them."""
AFTER_STATIC = (settings_routes, conversations, turns, openai, household_routes, account, shares)


def create_app(settings: config.Settings, searxng_url: str) -> FastAPI:
    # Opened here, before the server starts, as the command line's `serve` expects: the
    # data directory exists, and old files are imported, before the port is served.
    storage = Storage(
        settings.data_dir,
        database_url=settings.database_url,
        turn_digests=settings.keep_sources_turns,
    )
    storage.open()
    household = household_mode(storage, settings.auth_headers, settings.trusted_proxies)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        model = ModelClient.from_settings(settings)
        plan = PlanReader(settings.search_plan_file, settings.search_rate)
        searxng = Searxng(
            searxng_url, timeout=settings.searxng_timeout, plan=plan, count=storage.count_search
        )
        app.state.services = Services(settings, storage, model, searxng, plan)
        # Built before the first request rather than during it: the methods each path
        # serves, which the access check reads, and the presets.
        app.state.method_table = access.method_table(r.router for r in (*FIRST, *AFTER_STATIC))
        presets()
        if settings.loop_lag_probe:
            app.state.lag.start()
        async with app.state.mcp.running(app.state.services):
            yield
        await app.state.services.runs.close()  # running turns stopped, what came kept
        await app.state.lag.stop()
        await model.aclose()
        await searxng.aclose()
        app.state.services.extraction.close()
        await app.state.services.pending.close()
        storage.close()

    app = FastAPI(
        title="private search chat",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        # FastAPI's OpenTelemetry hooks stay off, whatever the environment says: nothing
        # about the conversations leaves this machine (and each request skips their work).
        telemetry={
            "tracing": False,
            "metrics": False,
            "logs": False,
            "operation_spans": False,
            "auto_configure": False,
        },
    )
    app.state.lag = LagProbe()
    app.state.access = access.Guard(
        allowed_hosts=settings.allowed_hosts,
        token=settings.auth_token,
        storage=storage,
        household=household,
    )
    app.state.mcp = McpEndpoint()
    app.state.answer_slots = AnswerSlots(settings.v1_answers_per_client)
    app.exception_handler(ServiceError)(service_error)
    app.exception_handler(RequestValidationError)(invalid_request)
    app.exception_handler(HTTPException)(http_error)
    app.add_middleware(access.AccessControl, guard=app.state.access)
    app.add_middleware(access.Forwarded, trusted=settings.trusted_proxies)  # outermost: first
    # In this order, the order of /openapi.json's paths. Each router's routes as they
    # are, not include_router: an included router's routes are built again for each app
    # (a pydantic model per field and response, about 100 ms an app, paid by its first
    # requests), while these were built once, with their module; the tests make hundreds
    # of apps. So what every route may answer is the routers' own (bodies.REFUSALS).
    for router in FIRST:
        app.router.routes.extend(router.router.routes)
    app.mount("/static", page.PageFiles(directory=page.STATIC_DIR), name="static")
    for router in AFTER_STATIC:
        app.router.routes.extend(router.router.routes)
    app.router.routes.append(app.state.mcp.route())
    return app
