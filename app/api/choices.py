"""The model and the context budget a request asks for, checked against what the model
server offers before anything is stored or sent upstream."""

from __future__ import annotations

from app.api.bodies import refused
from app.chat.services import Services
from app.store.rows import StoredSettings


async def check_model(services: Services, model: str, person: int | None) -> str:
    """Only the picker's models (`person`'s added ones among them): an invented id is
    refused here, not sent upstream."""
    if not await services.served.offers(model, person):
        # 404, as OpenAI answers for a model that does not exist.
        raise refused(
            f"unknown model {model[:80]!r}: pick one of the listed models, or add it in "
            "Settings (PUT /api/models)",
            404,
        )
    return model


async def check_budget(services: Services, chosen: StoredSettings, model: str) -> None:
    """A budget past the window the model server serves could never be used."""
    budget = chosen.get("context_budget")
    if budget is None or not model:
        return
    window = await services.served.window(model)
    if window and budget > window:
        raise refused(
            f"context_budget: at most {window:,} tokens, the window the model server "
            f"serves for {model}",
            422,
        )


async def chosen_model(
    services: Services, conversation_id: str, asked: str | None, person: int | None
) -> str:
    """The model asked for (the page always names one), else the conversation's, else
    DEFAULT_MODEL."""
    model = asked
    if not model:
        storage = services.storage
        chosen = await storage.settings(conversation_id)
        model = chosen.get("model") or services.settings.default_model
    if not model:
        raise refused("no model chosen: pass model, or set DEFAULT_MODEL", 422)
    return await check_model(services, model.strip(), person)
