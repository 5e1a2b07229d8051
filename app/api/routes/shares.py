"""Each person's share of the Brave plan (household mode, docs/household.md): what the
asker spent and may spend (`GET /api/search-share`), and the admin's reading and setting
of a person's limits (`GET`/`PUT /api/people/{person_id}/limits`, as the admin's other routes
of app/api/routes/household.py, whose check they share: anyone else, and the single-user
modes, get the 404 of a path that does not exist)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from app.api.bodies import REFUSALS
from app.api.deps import PersonDep, ServicesDep, StorageDep
from app.api.routes.household import AdminDep, PersonId
from app.store.search_shares import DEFAULT, NO_LIMIT, Limit, PersonShare, ShareLimits
from app.store.users import User

router = APIRouter(tags=["household"], responses=REFUSALS)


WHAT_A_LIMIT_IS = 'a limit is a whole number from 0, null (no limit) or "default"'


def number_only(value: object) -> object:
    """A count is a JSON number (1301.0 is one, as JSON Schema's integer), never a
    string or a boolean that lax parsing would turn into one."""
    if isinstance(value, bool | str):
        raise ValueError(WHAT_A_LIMIT_IS)
    return value


def one_reason(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """A wrong limit is refused with the one reason the admin's People page shows, not
    one refusal a branch of the union (a number, "default", null)."""
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError("limit", WHAT_A_LIMIT_IS) from None


Count = Annotated[int, BeforeValidator(number_only), Field(ge=0)]
Choice = Annotated[Count | Literal["default"] | None, WrapValidator(one_reason)]
Shown = int | Literal["default"] | None
"""A limit as the API says it: queries, the settings' default, or null (no limit)."""


class Limits(BaseModel):
    """A person's own limits: each a whole number from 0, null (no limit) or "default"
    (the settings' SEARCH_USER_..._LIMIT); one left out stays as it is."""

    model_config = ConfigDict(extra="forbid")
    daily: Choice = None
    monthly: Choice = None


class OwnLimits(BaseModel):
    daily: Shown
    monthly: Shown


class Share(BaseModel):
    """A person's limits and use: Brave queries today and this month (UTC)."""

    name: str
    daily: int | None
    """The daily limit that holds for them; null: none."""
    monthly: int | None
    own: OwnLimits
    """Their own limits as set ("default": the settings')."""
    today: int
    month: int
    text: str
    """All of it in words, as the page shows it ("today 3 of 20 · this month 41, no limit
    (default) Brave queries")."""


def shown(limit: Limit) -> Shown:
    return None if limit == NO_LIMIT else limit


def share_of(share: PersonShare) -> Share:
    own = OwnLimits(daily=shown(share.own[0]), monthly=shown(share.own[1]))
    limits = share.limits
    return Share(
        name=share.name,
        daily=limits.daily,
        monthly=limits.monthly,
        own=own,
        today=share.today,
        month=share.month,
        text=share.described(),
    )


async def person_of(person_id: PersonId, asker: AdminDep, storage: StorageDep) -> User:
    """The person the path names, the asker included (an admin has a share too)."""
    person = await storage.person(person_id)
    if person is None:
        raise HTTPException(status_code=404, detail=f"no person {person_id}")
    return person


Named = Annotated[User, Depends(person_of)]


@router.get("/api/search-share", responses={404: {"description": "not in household mode"}})
async def own_share(asker: PersonDep, services: ServicesDep) -> Share:
    """The asker's share of the Brave plan."""
    if asker is None:
        raise HTTPException(status_code=404)
    share = await services.storage.search_share(asker.name, ShareLimits.default(services.settings))
    if share is None:
        raise HTTPException(status_code=404)
    return share_of(share)


@router.get("/api/people/{person_id}/limits", responses={404: {"description": "no such person"}})
async def person_limits(person: Named, services: ServicesDep) -> Share:
    """A person's limits and use (an admin's)."""
    share = await services.storage.search_share(person.name, ShareLimits.default(services.settings))
    if share is None:
        raise HTTPException(status_code=404, detail=f"no person {person.id}")
    return share_of(share)


@router.put("/api/people/{person_id}/limits", responses={404: {"description": "no such person"}})
async def set_person_limits(person: Named, limits: Limits, services: ServicesDep) -> Share:
    """Set a person's own limits (an admin's): each a number, null for no limit,
    "default" for the settings'; one left out stays as it is."""
    given = limits.model_fields_set
    daily = stored_choice(limits.daily) if "daily" in given else None
    monthly = stored_choice(limits.monthly) if "monthly" in given else None
    storage = services.storage
    if not await storage.set_search_limits(person.name, daily, monthly):
        raise HTTPException(status_code=404, detail=f"no person {person.id}")
    share = await storage.search_share(person.name, ShareLimits.default(services.settings))
    assert share is not None
    return share_of(share)


def stored_choice(value: int | Literal["default"] | None) -> Limit:
    if value is None:
        return NO_LIMIT
    return DEFAULT if value == DEFAULT else value
