"""What the routes are given (docs/architecture.md): the services the app's lifespan built,
the storage among them, the access guard, who is asking (household mode), and the path
parameters several routes share.

Each dependency is a coroutine function: FastAPI runs a plain function in a worker thread,
a hop per request that the turn's first token would wait for."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi import Path as PathParam

from app.api.access import Guard, state_person
from app.api.people import NotAPerson
from app.chat.services import Services
from app.store.errors import NotFound
from app.store.rows import ID_PATTERN
from app.store.storage import Storage
from app.store.users import User


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


async def person(request: Request, guard: GuardDep) -> User | None:
    """Household mode: who is asking (NotAPerson, 401, for a request with the access token
    alone); None in the single-user modes."""
    if guard.household is None:
        return None
    asker = state_person(request.scope)
    if asker is None:
        raise NotAPerson("sign in as a person of the household (name and password)")
    return asker


PersonDep = Annotated[User | None, Depends(person)]


async def whose(asker: PersonDep) -> int | None:
    """Whose memory.md, added models and cached searches: the asker's in household mode (a
    request with the access token alone is refused there, 401); None, the one set of the
    single-user modes."""
    return asker.id if asker else None


Whose = Annotated[int | None, Depends(whose)]


async def named(request: Request) -> User | None:
    """The person the request names, if any, refusing no one: where the access token
    alone is served too (the page's start, `/v1`), as the single-user modes are."""
    return state_person(request.scope)


Named = Annotated[User | None, Depends(named)]


async def owned(
    conversation_id: Annotated[str, PathParam(pattern=ID_PATTERN, description="a conversation id")],
    asker: PersonDep,
    storage: StorageDep,
) -> str:
    """The path's conversation id, in household mode only when it is the asker's: another
    person's answers as a missing one does (404, the same body), before the route runs."""
    if asker is not None and await storage.owner(conversation_id) != asker.id:
        raise NotFound(f"no conversation {conversation_id}")
    return conversation_id


ConversationId = Annotated[str, Depends(owned)]
"""A conversation of the asker's (every conversation in the single-user modes)."""
ModelPath = Annotated[
    str, PathParam(min_length=1, max_length=200, description="a model id, slashes and all")
]
