"""The chat service's HTTP API (docs/architecture.md). The turn itself is app.chat.turn.run_turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import httpx
from fastapi import FastAPI, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from app import config
from app.api import access, lab, status
from app.api.bodies import (
    ChatMessage,
    ConversationChange,
    MemoryFact,
    MemoryText,
    ModelList,
    NewConversation,
    Regenerate,
    VersionChoice,
    errors,
)
from app.api.lag import LagProbe
from app.api.sse import EventStream
from app.chat import context
from app.chat.services import Services
from app.chat.settings import ChatSettings, presets
from app.chat.turn import run_turn
from app.model.client import ModelClient
from app.search.client import Searxng
from app.store import export
from app.store.errors import Conflict, Damaged, InvalidId, NotFound
from app.store.rows import ID_PATTERN
from app.store.storage import Lease, Storage, TurnInput

ConversationId = Annotated[str, PathParam(pattern=ID_PATTERN, description="a conversation id")]
ModelPath = Annotated[
    str, PathParam(min_length=1, max_length=200, description="a model id, slashes and all")
]
SSE_RESPONSE = {
    200: {
        "description": "Server-Sent Events: data: {type, ...} frames",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}
MARKDOWN_RESPONSE = {
    200: {
        "description": "the conversation as Markdown",
        "content": {"text/markdown": {"schema": {"type": "string"}}},
    }
}
STATIC_DIR = Path(__file__).resolve().parent / "static"
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


def refused(message: str, status: int = 400) -> HTTPException:
    return HTTPException(status_code=status, detail=message)


def validation_message(exc: RequestValidationError) -> str:
    """One readable line per problem, naming the field: "settings.web_search: ..."."""
    lines = []
    for error in exc.errors():
        where = ".".join(
            str(part) for part in error["loc"] if part not in ("body", "query", "path")
        )
        if error["type"] == "extra_forbidden":
            lines.append(f"unknown field {where!r}")
        elif error["type"] == "string_unicode":
            lines.append(f"{where}: contains a lone surrogate, which is not valid Unicode text")
        else:
            message = error["msg"].removeprefix("Value error, ")
            lines.append(f"{where}: {message}" if where else message)
    return "; ".join(lines)


def create_app(settings: config.Settings, searxng_url: str) -> FastAPI:
    storage = Storage(settings.data_dir, turn_digests=settings.keep_sources_turns)
    storage.open()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        model = ModelClient.from_settings(settings)
        searxng = Searxng(searxng_url, timeout=settings.searxng_timeout)
        app.state.services = Services(settings, storage, model, searxng)
        # Built before the first request rather than during it (tens of ms each): the
        # OpenAPI schema the access check reads its methods from, and the presets.
        app.state.method_table = access.method_table(app)
        presets()
        if settings.loop_lag_probe:
            app.state.lag.start()
        yield
        await app.state.lag.stop()
        await model.aclose()
        await searxng.aclose()
        app.state.services.extraction.close()
        storage.close()

    app = FastAPI(
        title="private search chat",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        # Every route may refuse unreadable JSON (400) or invalid input (422), both with
        # {"detail": str}; declared once here instead of FastAPI's list-shaped 422.
        responses=errors(400, 422),
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
    app.state.access = access.Guard(allowed_hosts=settings.allowed_hosts, token=settings.auth_token)

    for error, code in (
        (InvalidId, 400),
        (NotFound, 404),
        (Damaged, 409),
        (Conflict, 409),
        (config.ConfigError, 400),
    ):

        async def handler(request: Request, exc: Exception, code: int = code) -> JSONResponse:
            return JSONResponse({"detail": str(exc)}, status_code=code)

        app.add_exception_handler(error, handler)

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": validation_message(exc)}, status_code=422)

    def services(request: Request) -> Services:
        return request.app.state.services

    @app.get("/healthz")
    async def healthz(request: Request) -> dict[str, str | float]:
        """The service is up; whether its SearXNG answers too (nothing private). With
        LOOP_LAG_PROBE=1, also the event loop's worst lateness since the last call, and the
        same less the time the loop waited for a core (see app/api/lag.py)."""
        try:
            answer = await services(request).searxng.http.get("/healthz", timeout=2)
            search = "ok" if answer.status_code == 200 else "unhealthy"
        except httpx.HTTPError:
            search = "unreachable"
        health: dict[str, str | float] = {
            "status": "ok" if search == "ok" else "degraded",
            "search": search,
        }
        if settings.loop_lag_probe:
            health["loop_lag_ms"], own = request.app.state.lag.take()
            if own is not None:
                health["loop_lag_own_ms"] = own
        return health

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)

    app.add_middleware(access.AccessControl, guard=app.state.access)  # outermost: first
    app.include_router(access.router)
    app.include_router(lab.router)
    app.include_router(status.router)
    app.mount("/static", PageFiles(directory=STATIC_DIR), name="static")

    @app.get("/api/config")
    async def api_config(request: Request) -> dict[str, Any]:
        listed = await services(request).model.models() or []
        return {
            "models": {
                "configured": list(settings.models),
                "server": [m for m in listed if m not in settings.models],
                "added": await storage.models(),
            },
            "tool_refusals": await storage.tool_refusals(),
            "default_model": settings.default_model,
            "summary_model": settings.summary_model,
            "defaults": ChatSettings.defaults(settings).as_dict(),
            "help": config.settings_help(),
            "presets": presets(),
            "auth": bool(settings.auth_token),
        }

    @app.get("/api/memory", responses=errors(409))
    async def get_memory() -> dict[str, str]:
        return {"text": await storage.read_memory()}

    @app.put("/api/memory", responses=errors(413, 415, 422))
    async def put_memory(body: MemoryText, request: Request) -> dict[str, str]:
        async with services(request).memory_lock:  # shared with compression's merge
            await storage.write_memory(body.text)
        return {"text": body.text}

    @app.post("/api/memory/facts/remove", responses=errors(404, 409, 413, 415, 422))
    async def remove_fact(body: MemoryFact, request: Request) -> dict[str, str]:
        """Undo of a fact a compression saved: exactly its line leaves memory.md."""
        async with services(request).memory_lock:
            text = context.remove_fact(await storage.read_memory(), body.fact)
            if text is None:
                raise refused("that fact is not in memory.md (edited or removed since?)", 404)
            await storage.write_memory(text)
        return {"text": text}

    @app.post("/api/memory/facts", responses=errors(409, 413, 415, 422))
    async def keep_fact(body: MemoryFact, request: Request) -> dict[str, str]:
        """Keep after an Undo: the fact back at the end of memory.md, unless it is there."""
        async with services(request).memory_lock:
            text, added = context.merge_facts(await storage.read_memory(), [body.fact])
            if added:
                await storage.write_memory(text)
        return {"text": text}

    @app.put("/api/models", responses=errors(413, 415, 422))
    async def put_models(body: ModelList) -> dict[str, list[str]]:
        await storage.set_models(body.models)
        return {"models": body.models}

    @app.delete("/api/models/tool-refusals/{model:path}", status_code=204, responses=errors(404))
    async def forget_tool_refusal(model: ModelPath) -> Response:
        """Forget that the model's server refused the web tools: its next turn offers them."""
        if not await storage.forget_tool_refusal(model):
            raise refused(f"no refusal of the web tools is remembered for {model[:80]!r}", 404)
        return Response(status_code=204)

    @app.get("/api/conversations")
    async def list_conversations(q: Annotated[str, config.Text(200)] = "") -> list[dict[str, Any]]:
        return await storage.list(q)

    @app.post("/api/conversations", status_code=201, responses=errors(404, 413, 415, 422))
    async def create_conversation(
        request: Request, body: NewConversation | None = None
    ) -> dict[str, Any]:
        body = body or NewConversation()
        chosen = body.settings.changes()
        if "model" in chosen:
            await check_model(request, chosen["model"])
        await check_budget(request, chosen, chosen.get("model") or settings.default_model)
        return await storage.create(
            body.title, {**ChatSettings.defaults(settings).as_dict(), **chosen}
        )

    @app.get("/api/conversations/{conversation_id}", responses=errors(404, 409, 422))
    async def get_conversation(conversation_id: ConversationId) -> dict[str, Any]:
        return await storage.load(conversation_id)

    @app.get(
        "/api/conversations/{conversation_id}/export",
        responses={**MARKDOWN_RESPONSE, **errors(404, 409, 422)},
        response_class=Response,
    )
    async def export_conversation(conversation_id: ConversationId) -> Response:
        conversation = await storage.load(conversation_id)
        name = f"conversation-{conversation_id}.md"
        return Response(
            export.markdown(conversation),
            media_type="text/markdown; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    @app.patch("/api/conversations/{conversation_id}", responses=errors(404, 409, 413, 415, 422))
    async def patch_conversation(
        conversation_id: ConversationId, body: ConversationChange, request: Request
    ) -> dict[str, Any]:
        await storage.row(conversation_id)  # 404 before a model check
        chosen = body.settings.changes() if body.settings else {}
        if "model" in chosen:
            await check_model(request, chosen["model"])
        if "context_budget" in chosen:
            model = chosen.get("model") or (await storage.settings(conversation_id)).get("model")
            await check_budget(request, chosen, model or settings.default_model)
        return await storage.change(conversation_id, body.title, chosen)

    @app.delete("/api/conversations/{conversation_id}", status_code=204, responses=errors(404, 409))
    async def delete_conversation(conversation_id: ConversationId) -> Response:
        await storage.delete(conversation_id)
        return Response(status_code=204)

    async def check_model(request: Request, model: str) -> str:
        """Only the picker's models: an invented id is refused here, not sent upstream."""
        if not await services(request).offers(model):
            # 404, as OpenAI answers for a model that does not exist.
            raise refused(
                f"unknown model {model[:80]!r}: pick one of the listed models, or add it in "
                "Settings (PUT /api/models)",
                404,
            )
        return model

    async def check_budget(request: Request, chosen: dict[str, Any], model: str) -> None:
        """A budget past the window the model server serves could never be used."""
        budget = chosen.get("context_budget")
        if budget is None or not model:
            return
        window = await services(request).served_window(model)
        if window and budget > window:
            raise refused(
                f"context_budget: at most {window:,} tokens, the window the model server "
                f"serves for {model}",
                422,
            )

    async def chosen_model(request: Request, conversation_id: str, asked: str | None) -> str:
        """The model asked for (the page always names one), else the conversation's, else
        DEFAULT_MODEL."""
        model = asked
        if not model:
            chosen = await storage.settings(conversation_id)
            model = chosen.get("model") or settings.default_model
        if not model:
            raise refused("no model chosen: pass model, or set DEFAULT_MODEL", 422)
        return await check_model(request, model.strip())

    def stream_turn(request: Request, lease: Lease, start: TurnInput, model: str) -> Response:
        """SSE for one turn, which holds the conversation's lease until it ends: the
        outcome's write releases it (in the same transaction), and the stream's end does
        should the write fail or the client leave before the turn starts (only its owner
        can release it, so a late release frees nothing another turn holds). The stream
        closes the turn before that: its own finally writes the outcome first."""
        turn = run_turn(services(request), lease, start, model)
        return EventStream(turn, closed=lease.release)

    @app.post(
        "/api/conversations/{conversation_id}/chat",
        responses={**SSE_RESPONSE, **errors(404, 409, 413, 415, 422)},
    )
    async def chat(
        conversation_id: ConversationId, body: ChatMessage, request: Request
    ) -> Response:
        model = await chosen_model(request, conversation_id, body.model)
        lease, start = await storage.begin_turn(conversation_id, body.message, model)
        return stream_turn(request, lease, start, model)

    @app.post(
        "/api/conversations/{conversation_id}/regenerate",
        responses={**SSE_RESPONSE, **errors(404, 409, 413, 415, 422)},
    )
    async def regenerate(
        conversation_id: ConversationId, request: Request, body: Regenerate | None = None
    ) -> Response:
        model = await chosen_model(request, conversation_id, body.model if body else None)
        lease, start = await storage.begin_turn(conversation_id, None, model)
        return stream_turn(request, lease, start, model)

    @app.post(
        "/api/conversations/{conversation_id}/edit",
        responses={**SSE_RESPONSE, **errors(404, 409, 413, 415, 422)},
    )
    async def edit_last_message(
        conversation_id: ConversationId, body: ChatMessage, request: Request
    ) -> Response:
        """Send `message` in place of the last one: that question and its answer stay as a
        version of the turn (GET shows them under `versions`)."""
        model = await chosen_model(request, conversation_id, body.model)
        lease, start = await storage.begin_turn(conversation_id, body.message, model, edit=True)
        return stream_turn(request, lease, start, model)

    @app.put(
        "/api/conversations/{conversation_id}/turns/{position}/version",
        responses=errors(404, 409, 413, 415, 422),
    )
    async def switch_version(
        conversation_id: ConversationId,
        position: Annotated[int, PathParam(ge=0, le=10**9, description="its user message")],
        body: VersionChoice,
    ) -> dict[str, Any]:
        """Show another version of a turn; what followed it comes with it. 409 while a turn
        streams in the conversation."""
        return await storage.switch_version(conversation_id, position, body.index)

    @app.post("/api/conversations/{conversation_id}/rewind", responses=errors(404, 409, 415, 422))
    async def rewind_last_message(conversation_id: ConversationId) -> dict[str, Any]:
        return {"message": await storage.rewind(conversation_id)}

    return app
