"""What the routes are given (docs/architecture.md): the services the app's lifespan built,
the storage among them, the access guard, and the path parameters several routes share.

Each dependency is a coroutine function: FastAPI runs a plain function in a worker thread,
a hop per request that the turn's first token would wait for."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi import Path as PathParam

from app.api.access import Guard
from app.chat.services import Services
from app.store.rows import ID_PATTERN
from app.store.storage import Storage


async def services(request: Request) -> Services:
    built: Services = request.app.state.services
    return built


ServicesDep = Annotated[Services, Depends(services)]


async def storage(services: ServicesDep) -> Storage:
    return services.storage


StorageDep = Annotated[Storage, Depends(storage)]


async def guard(request: Request) -> Guard:
    """The access middleware's state, which the login routes share."""
    shared: Guard = request.app.state.access
    return shared


GuardDep = Annotated[Guard, Depends(guard)]

ConversationId = Annotated[str, PathParam(pattern=ID_PATTERN, description="a conversation id")]
ModelPath = Annotated[
    str, PathParam(min_length=1, max_length=200, description="a model id, slashes and all")
]
