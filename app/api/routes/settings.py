"""The Settings panel's resources: what the page starts from (models, defaults, help,
presets), the user's models, the refusals of the web tools remembered per model,
memory.md with its facts (in household mode the asker's own), and the search cache."""

from __future__ import annotations

from fastapi import APIRouter, Response
from typing_extensions import TypedDict

from app.api.bodies import (
    REFUSALS,
    MemoryFact,
    MemoryText,
    PickerModels,
    errors,
    refused,
    settings_help,
)
from app.api.deps import GuardDep, ModelPath, Named, ServicesDep, StorageDep, Whose
from app.chat import context
from app.chat.settings import ChatSettings, presets
from app.store.rows import StoredSettings, ToolRefusal

router = APIRouter(prefix="/api", responses=REFUSALS)


class PickerList(TypedDict):
    configured: list[str]
    """MODELS"""
    server: list[str]
    """Listed by the model server, beyond MODELS."""
    added: list[str]
    """Added by the user in Settings."""


class PageConfig(TypedDict):
    """What the page starts from."""

    models: PickerList
    tool_refusals: list[ToolRefusal]
    default_model: str
    summary_model: str
    defaults: StoredSettings
    help: dict[str, str]
    presets: dict[str, str]
    auth: bool
    search_price_per_1000: float
    """BRAVE_PRICE_PER_1000: what an answer's searches cost is shown at it; 0: not shown."""
    person: str | None
    """Household mode: the asker's name, under which the page keeps their unsent drafts in
    the browser; None otherwise."""


@router.get("/config")
async def api_config(services: ServicesDep, guard: GuardDep, asker: Named) -> PageConfig:
    settings, storage = services.settings, services.storage
    listed = await services.model.models() or []
    return {
        "models": {
            "configured": list(settings.models),
            "server": [m for m in listed if m not in settings.models],
            "added": await storage.models(asker.id if asker else None),
        },
        "tool_refusals": await storage.tool_refusals(),
        "default_model": settings.default_model,
        "summary_model": settings.summary_model,
        "defaults": ChatSettings.defaults(settings).as_dict(),
        "help": settings_help(),
        "presets": presets(),
        "auth": guard.sessions is not None,
        "search_price_per_1000": settings.brave_price_per_1000,
        "person": asker.name if asker else None,
    }


@router.get("/memory", responses=errors(409))
async def get_memory(storage: StorageDep, person: Whose) -> dict[str, str]:
    return {"text": await storage.read_memory(person)}


@router.put("/memory", responses=errors(413, 415, 422))
async def put_memory(body: MemoryText, services: ServicesDep, person: Whose) -> dict[str, str]:
    async with services.memory_lock:  # shared with compression's merge
        text = await services.storage.write_memory(body.text, person)
    return {"text": text}


@router.post("/memory/facts/remove", responses=errors(404, 409, 413, 415, 422))
async def remove_fact(body: MemoryFact, services: ServicesDep, person: Whose) -> dict[str, str]:
    """Undo of a fact a compression saved: exactly its line leaves memory.md."""
    storage = services.storage
    async with services.memory_lock:
        text = context.remove_fact(await storage.read_memory(person), body.fact)
        if text is None:
            raise refused("that fact is not in memory.md (edited or removed since?)", 404)
        text = await storage.write_memory(text, person)
    return {"text": text}


@router.post("/memory/facts", responses=errors(409, 413, 415, 422))
async def keep_fact(body: MemoryFact, services: ServicesDep, person: Whose) -> dict[str, str]:
    """Keep after an Undo: the fact back at the end of memory.md, unless it is there."""
    storage = services.storage
    async with services.memory_lock:
        text, added = context.merge_facts(await storage.read_memory(person), [body.fact])
        if added:
            text = await storage.write_memory(text, person)
    return {"text": text}


@router.put("/models", responses=errors(413, 415, 422))
async def put_models(
    body: PickerModels, storage: StorageDep, person: Whose
) -> dict[str, list[str]]:
    """The asker's added models (household mode), in the order given."""
    await storage.set_models(body.models, person)
    return {"models": body.models}


@router.delete("/models/tool-refusals/{model:path}", status_code=204, responses=errors(404))
async def forget_tool_refusal(model: ModelPath, storage: StorageDep) -> Response:
    """Forget that the model's server refused the web tools: its next turn offers them."""
    if not await storage.forget_tool_refusal(model):
        raise refused(f"no refusal of the web tools is remembered for {model[:80]!r}", 404)
    return Response(status_code=204)


@router.delete("/search-cache")
async def empty_search_cache(services: ServicesDep, person: Whose) -> dict[str, int]:
    """Empty the search cache: every search asks the engines again (and spends a query).
    In household mode only the asker's searches leave it (their own cache, or in a shared
    one the searches they ran): another person's are not theirs to empty."""
    return {"emptied": await services.searcher.clear(person)}
