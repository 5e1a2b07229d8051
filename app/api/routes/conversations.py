"""The conversations: list and search, create, read, export as Markdown, rename or change
their settings, delete. Their turns are app/api/routes/turns.py."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response

from app.api.bodies import (
    AS_STORED,
    REFUSALS,
    ConversationChange,
    NewConversation,
    OpenApiResponses,
    errors,
)
from app.api.choices import check_budget, check_model
from app.api.deps import ConversationId, ServicesDep, StorageDep, Whose
from app.chat.settings import ChatSettings
from app.store.rows import Conversation, Entry

router = APIRouter(prefix="/api/conversations", responses=REFUSALS)

MARKDOWN_RESPONSE: OpenApiResponses = {
    200: {
        "description": "the conversation as Markdown",
        "content": {"text/markdown": {"schema": {"type": "string"}}},
    }
}


@router.get("", response_model=list[AS_STORED])
async def list_conversations(storage: StorageDep, person: Whose, q: str = "") -> list[Entry]:
    return await storage.list(q, owner=person)


@router.post("", status_code=201, response_model=AS_STORED, responses=errors(404, 413, 415, 422))
async def create_conversation(
    services: ServicesDep, person: Whose, body: NewConversation | None = None
) -> Conversation:
    body = body or NewConversation()
    chosen = body.settings.changes()
    if "model" in chosen:
        await check_model(services, chosen["model"], person)
    await check_budget(services, chosen, chosen.get("model") or services.settings.default_model)
    storage = services.storage
    defaults = ChatSettings.defaults(services.settings).as_dict()
    return await storage.create(body.title, {**defaults, **chosen}, person)


@router.get("/{conversation_id}", response_model=AS_STORED, responses=errors(404, 409, 422))
async def get_conversation(conversation_id: ConversationId, storage: StorageDep) -> Conversation:
    return await storage.load(conversation_id)


@router.get(
    "/{conversation_id}/export",
    responses={**MARKDOWN_RESPONSE, **errors(404, 409, 422)},
    response_class=Response,
)
async def export_conversation(conversation_id: ConversationId, storage: StorageDep) -> Response:
    conversation = await storage.load(conversation_id)
    name = f"conversation-{conversation_id}.md"
    # Every answer parsed and written back: about a second for 50 answers of 3 KB.
    text = await asyncio.to_thread(as_markdown, conversation)
    return Response(
        text,
        media_type="text/markdown; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


def as_markdown(conversation: Conversation) -> str:
    # The export's Markdown parser and writer (a tenth of a second of imports) are imported
    # with the first export, in its thread, not with the service.
    from app.store.export import markdown

    return markdown(conversation)


@router.patch(
    "/{conversation_id}", response_model=AS_STORED, responses=errors(404, 409, 413, 415, 422)
)
async def patch_conversation(
    conversation_id: ConversationId,
    body: ConversationChange,
    services: ServicesDep,
    person: Whose,
) -> Conversation:
    storage = services.storage
    # Read first: an unknown conversation is a 404 before a model check.
    stored = await storage.settings(conversation_id)
    chosen = body.settings.changes() if body.settings else {}
    if "model" in chosen:
        await check_model(services, chosen["model"], person)
    if "context_budget" in chosen:
        model = chosen.get("model") or stored.get("model")
        await check_budget(services, chosen, model or services.settings.default_model)
    return await storage.change(conversation_id, body.title, chosen)


@router.delete("/{conversation_id}", status_code=204, responses=errors(404, 409))
async def delete_conversation(conversation_id: ConversationId, storage: StorageDep) -> Response:
    await storage.delete(conversation_id)
    return Response(status_code=204)
