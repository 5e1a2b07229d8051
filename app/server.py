"""The chat service's HTTP API (SPEC 4.7). The turn itself is app.turn.run_turn."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from sse_starlette.sse import EventSourceResponse
from starlette.background import BackgroundTask

from app import config, export, lab, status
from app.context import DEFAULT_COMPRESS_PROMPT
from app.llm import ModelClient
from app.search import Searxng
from app.storage import InvalidId, NotFound, Storage, now
from app.tools import DEFAULT_TOOL_NOTE
from app.turn import Services, rewind, run_turn

MAX_MESSAGE_CHARS = 200_000
MAX_MEMORY_CHARS = 200_000
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


def conversation_defaults(settings: config.Settings) -> dict[str, Any]:
    return {
        "model": settings.default_model,
        "system_prompt": config.presets().get("default", "You are a helpful assistant."),
        "context_budget": settings.context_budget_tokens,
        "web_search": True,
        "web_fetch": True,
        "search_max_uses": settings.web_search_max_uses,
        "fetch_max_uses": settings.web_fetch_max_uses,
        "tool_note": DEFAULT_TOOL_NOTE,
        "compress_prompt": DEFAULT_COMPRESS_PROMPT,
        "search_locale": settings.search_locale,
        "search_engines": "",
    }


def bad_request(message: str, status: int = 400) -> HTTPException:
    return HTTPException(status_code=status, detail=message)


async def json_body(request: Request, *, optional: bool = False) -> dict[str, Any]:
    if optional and not await request.body():
        return {}
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise bad_request("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


def create_app(settings: config.Settings, searxng_url: str) -> FastAPI:
    storage = Storage(settings.data_dir)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        model = ModelClient(settings.llm_base_url, settings.llm_api_key)
        searxng = Searxng(searxng_url)
        app.state.services = Services(settings, storage, model, searxng)
        yield
        await model.aclose()
        await searxng.aclose()

    app = FastAPI(title="private search chat", docs_url=None, redoc_url=None, lifespan=lifespan)

    @app.middleware("http")
    async def require_token(request: Request, call_next: Any) -> Response:
        """With AUTH_TOKEN set, the API wants it as a bearer token (the page asks for it)."""
        if settings.auth_token and request.url.path.startswith("/api/"):
            given = request.headers.get("authorization", "")
            if not secrets.compare_digest(given, f"Bearer {settings.auth_token}"):
                return JSONResponse({"detail": "missing or wrong access token"}, status_code=401)
        return await call_next(request)

    @app.exception_handler(InvalidId)
    async def invalid_id(request: Request, exc: InvalidId) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(config.ConfigError)
    async def config_error(request: Request, exc: config.ConfigError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    def services(request: Request) -> Services:
        return request.app.state.services

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)

    @app.middleware("http")
    async def static_headers(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        if request.url.path.startswith("/static/"):
            response.headers.update(PAGE_HEADERS)
        return response

    app.include_router(lab.router)
    app.include_router(status.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/api/config")
    async def api_config(request: Request) -> dict[str, Any]:
        listed = await services(request).model.models() or []
        return {
            "models": {
                "configured": list(settings.models),
                "server": [m for m in listed if m not in settings.models],
                "added": storage.read_models(),
            },
            "default_model": settings.default_model,
            "summary_model": settings.summary_model,
            "defaults": conversation_defaults(settings),
            "help": {name: help for name, (_kind, help) in config.CONVERSATION_SETTINGS.items()},
            "presets": config.presets(),
        }

    @app.get("/api/memory")
    def get_memory() -> dict[str, str]:
        return {"text": storage.read_memory()}

    @app.put("/api/memory")
    async def put_memory(request: Request) -> dict[str, str]:
        text = (await json_body(request)).get("text")
        if not isinstance(text, str) or len(text) > MAX_MEMORY_CHARS:
            raise bad_request(f"text must be a string of at most {MAX_MEMORY_CHARS} characters")
        storage.write_memory(text)
        return {"text": text}

    @app.put("/api/models")
    async def put_models(request: Request) -> dict[str, list[str]]:
        models = (await json_body(request)).get("models")
        if not isinstance(models, list) or not all(
            isinstance(m, str) and 0 < len(m.strip()) <= 200 for m in models
        ):
            raise bad_request("models must be a list of model ids (non-empty strings)")
        cleaned = list(dict.fromkeys(m.strip() for m in models))
        storage.write_models(cleaned)
        return {"models": cleaned}

    @app.get("/api/conversations")
    def list_conversations(q: str = "") -> list[dict[str, Any]]:
        return storage.list(q)

    @app.post("/api/conversations", status_code=201)
    async def create_conversation(request: Request) -> dict[str, Any]:
        body = await json_body(request, optional=True)
        title = body.get("title", "New conversation")
        if not isinstance(title, str) or not title.strip():
            raise bad_request("title must be a non-empty string")
        chosen = config.check_conversation_settings(body.get("settings", {}))
        return storage.create(
            {
                "title": title.strip()[:200],
                "settings": {**conversation_defaults(settings), **chosen},
                "messages": [],
                "summary": "",
                "summarized": 0,
            }
        )

    @app.get("/api/conversations/{conversation_id}")
    def get_conversation(conversation_id: str) -> dict[str, Any]:
        return storage.load(conversation_id)

    @app.get("/api/conversations/{conversation_id}/export")
    def export_conversation(conversation_id: str) -> Response:
        conversation = storage.load(conversation_id)
        name = f"conversation-{conversation_id}.md"
        return Response(
            export.markdown(conversation),
            media_type="text/markdown; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    @app.patch("/api/conversations/{conversation_id}")
    async def patch_conversation(conversation_id: str, request: Request) -> dict[str, Any]:
        storage.load(conversation_id)
        body = await json_body(request)
        unknown = set(body) - {"title", "settings"}
        if unknown:
            raise bad_request(f"unknown fields: {', '.join(sorted(unknown))}")
        title = body.get("title")
        if title is not None and (not isinstance(title, str) or not title.strip()):
            raise bad_request("title must be a non-empty string")
        chosen = config.check_conversation_settings(body.get("settings", {}))

        def change(conversation: dict[str, Any]) -> None:
            if title is not None:
                conversation["title"] = title.strip()[:200]
            conversation["settings"].update(chosen)

        return storage.update(conversation_id, change)

    @app.delete("/api/conversations/{conversation_id}", status_code=204)
    def delete_conversation(conversation_id: str) -> Response:
        if conversation_id in storage.running:
            raise bad_request("a turn is running in this conversation; stop it first", 409)
        storage.delete(conversation_id)
        return Response(status_code=204)

    def start_turn(request: Request, conversation_id: str, model: str, prepare: Any) -> Response:
        """SSE for one turn, which holds the conversation until it ends.

        The claim is released by the stream's end and, should the client leave before the
        stream starts, by the response's background task."""
        if not storage.claim(conversation_id):
            raise bad_request("a turn is already running in this conversation", 409)

        async def events() -> AsyncIterator[dict[str, str]]:
            try:
                storage.update(conversation_id, prepare)
                async for event in run_turn(services(request), conversation_id, model):
                    if event["type"] in ("done", "error"):
                        # The outcome is written before these are yielded; releasing now
                        # lets a client that sends again on seeing them find it free.
                        storage.release(conversation_id)
                    yield {"data": json.dumps(event, ensure_ascii=False)}
            finally:
                storage.release(conversation_id)

        release = BackgroundTask(storage.release, conversation_id)
        return EventSourceResponse(events(), ping=15, background=release)

    def chosen_model(body: dict[str, Any], conversation: dict[str, Any]) -> str:
        model = body.get("model") or conversation["settings"]["model"] or settings.default_model
        if not isinstance(model, str) or not model.strip():
            raise bad_request("no model chosen: pass model, or set DEFAULT_MODEL")
        return model.strip()

    @app.post("/api/conversations/{conversation_id}/chat")
    async def chat(conversation_id: str, request: Request) -> Response:
        conversation = storage.load(conversation_id)
        body = await json_body(request)
        message = body.get("message")
        if not isinstance(message, str) or not message.strip():
            raise bad_request("message must be a non-empty string")
        if len(message) > MAX_MESSAGE_CHARS:
            raise bad_request(f"message is longer than {MAX_MESSAGE_CHARS} characters")
        model = chosen_model(body, conversation)

        def prepare(conversation: dict[str, Any]) -> None:
            conversation["settings"]["model"] = model  # the picker is saved at once
            if conversation["title"] == "New conversation":
                conversation["title"] = " ".join(message.split())[:60].strip()
            conversation["messages"].append({"role": "user", "content": message, "created": now()})

        return start_turn(request, conversation_id, model, prepare)

    @app.post("/api/conversations/{conversation_id}/regenerate")
    async def regenerate(conversation_id: str, request: Request) -> Response:
        conversation = storage.load(conversation_id)
        body = await json_body(request, optional=True)
        if not any(m["role"] == "user" for m in conversation["messages"]):
            raise bad_request("nothing to regenerate: the conversation has no message", 409)
        model = chosen_model(body, conversation)

        def prepare(conversation: dict[str, Any]) -> None:
            conversation["settings"]["model"] = model
            while conversation["messages"] and conversation["messages"][-1]["role"] != "user":
                conversation["messages"].pop()

        return start_turn(request, conversation_id, model, prepare)

    @app.post("/api/conversations/{conversation_id}/rewind")
    def rewind_last_message(conversation_id: str) -> dict[str, Any]:
        if conversation_id in storage.running:
            raise bad_request("a turn is running in this conversation; stop it first", 409)
        if not any(m["role"] == "user" for m in storage.load(conversation_id)["messages"]):
            raise bad_request("nothing to rewind: the conversation has no message", 409)
        restored: list[str | None] = []
        storage.update(conversation_id, lambda c: restored.append(rewind(c)))
        return {"message": restored[0]}

    return app
