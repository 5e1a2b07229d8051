"""The floor under the chat service's CPU per turn: the same stack (uvicorn with uvloop and
httptools, FastAPI, app.api.sse's event stream, httpx over app.transport, httpx-sse) doing only
a proxy's work: take the message, stream the model's answer back as SSE events. No storage,
no access control, no context, no tools. Whatever the service spends above this is ours
(bench/turn_cpu.py runs both).

Run: LLM_BASE_URL=http://127.0.0.1:PORT/v1 python -m uvicorn bench.floor_app:app
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from fastapi import FastAPI, Request
from httpx_sse import aconnect_sse

from app.api.sse import EventStream
from app.transport import AiohttpTransport

app = FastAPI()
http = httpx.AsyncClient(timeout=30, transport=AiohttpTransport())


@app.get("/healthz")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/api/conversations/{conversation_id}/chat")
async def chat(conversation_id: str, request: Request) -> EventStream:
    message = (await request.json())["message"]
    body = {"model": "m", "messages": [{"role": "user", "content": message}], "stream": True}
    return EventStream(answer(body), closed=nothing)


async def nothing() -> None:
    pass


async def answer(body: dict[str, Any]) -> AsyncGenerator[dict[str, str], None]:
    url = f"{os.environ['LLM_BASE_URL']}/chat/completions"
    async with aconnect_sse(http, "POST", url, json=body) as source:
        async for event in source.aiter_sse():
            if event.data.strip() == "[DONE]":
                break
            for choice in json.loads(event.data).get("choices", []):
                if text := (choice.get("delta") or {}).get("content"):
                    yield {"type": "delta", "text": text}
    yield {"type": "done"}
