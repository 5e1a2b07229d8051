"""The household's people, for its admins (docs/household.md): list, add, disable or
enable, make an admin or no longer one, end someone's sessions, give someone a new sign-in
link, remove someone and everything of theirs. Anyone else is answered as for a path that
does not exist (404), so the routes tell no one they are there. And every person's own
download of their conversations ("Export my conversations"): an admin removes a person
without ever reading what they wrote."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from app.api.access import state_person
from app.api.bodies import REFUSALS, OpenApiResponses, errors
from app.api.deps import GuardDep, PersonDep, StorageDep
from app.search.cache import own_rows
from app.store.errors import Conflict, Damaged, NotFound, Refused
from app.store.passwords import MAX_PASSWORD_CHARS, hash_password
from app.store.rows import Conversation
from app.store.search_cache import OwnCache
from app.store.users import MAX_NAME_CHARS, NewUser, User

router = APIRouter(tags=["household"], responses=REFUSALS)

NOT_THERE = "Not Found"
"""What a path that does not exist answers: a non-admin learns nothing more."""


async def admin(request: Request, guard: GuardDep) -> User:
    """The asker, when they are an admin of the household; else 404, as for no such path."""
    asker = state_person(request.scope)
    if guard.household is None or asker is None or not asker.admin:
        raise HTTPException(404, NOT_THERE)
    return asker


AdminDep = Annotated[User, Depends(admin)]
PersonId = Annotated[int, PathParam(ge=1, le=2**62, description="a person's id")]


class Person(BaseModel):
    """A person as the admin sees them (never their password's hash)."""

    id: int
    name: str
    display_name: str | None
    email: str | None
    admin: bool
    disabled: bool
    created: str
    signs_in: Literal["password", "proxy"]
    """With a password on the page, or (none set) only through the forward-auth proxy."""
    you: bool
    """Whether this is the asker (whom the admin routes refuse: see someone_else)."""

    @classmethod
    def of(cls, user: User, asker: User) -> Person:
        return cls(
            id=user.id,
            name=user.name,
            display_name=user.display_name,
            email=user.email,
            admin=user.admin,
            disabled=user.disabled,
            created=user.created,
            signs_in="password" if user.password else "proxy",
            you=user.id == asker.id,
        )


class NewPerson(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    admin: bool = False
    password: str | None = Field(None, min_length=1, max_length=MAX_PASSWORD_CHARS)
    """None: they sign in through the proxy only (or once a password is set for them)."""
    display_name: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS)
    email: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS)
    link: bool = False
    """A one-time sign-in link instead of a password: they choose theirs on the page."""


class AddedPerson(Person):
    sign_in_link: str | None = None
    """With `link`: the page's address to give them (after the service's own origin),
    valid for LINK_SECONDS and once; only its digest is kept."""


class PersonChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    disabled: bool | None = None
    admin: bool | None = None
    """Made an admin, or no longer one (never the asker: the household keeps its admin)."""


async def someone_else(person_id: PersonId, asker: AdminDep, storage: StorageDep) -> User:
    """The person the path names, never the asker (an admin who disabled or removed
    themself would lock the household out of its own page)."""
    person = await storage.person(person_id)
    if person is None:
        raise NotFound(f"no person {person_id}")
    if person.id == asker.id:
        raise Conflict("not yourself: another admin can do that")
    return person


SomeoneElse = Annotated[User, Depends(someone_else)]


@router.get("/api/people", response_model=list[Person], responses=errors(404))
async def list_people(asker: AdminDep, storage: StorageDep) -> list[Person]:
    return [Person.of(user, asker) for user in await storage.users()]


@router.post(
    "/api/people", status_code=201, response_model=AddedPerson, responses=errors(404, 409, 422)
)
async def add_person(
    body: NewPerson, asker: AdminDep, storage: StorageDep, guard: GuardDep
) -> AddedPerson:
    if body.link and body.password is not None:
        raise Refused("a password or a sign-in link, not both")
    hashed = (
        None if body.password is None else await asyncio.to_thread(hash_password, body.password)
    )
    new = NewUser(body.name, body.display_name, body.email, body.admin, hashed)
    added = await storage.add_user(new)
    link = await sign_in_link(added, storage, guard) if body.link else None
    return AddedPerson(**Person.of(added, asker).model_dump(), sign_in_link=link)


async def sign_in_link(person: User, storage: StorageDep, guard: GuardDep) -> str:
    """A one-time sign-in link for the person, valid LINK_SECONDS (only its digest kept):
    the page's address after the service's origin. An earlier unused one stops working."""
    assert guard.sessions is not None  # household mode: the admin dependency said so
    link = guard.sessions.digest.new_link()
    await storage.add_sign_in_link(person.id, link.key, link.expires)
    return link.path


@router.patch(
    "/api/people/{person_id}", response_model=Person, responses=errors(400, 404, 409, 422)
)
async def change_person(
    body: PersonChange, person: SomeoneElse, asker: AdminDep, storage: StorageDep
) -> Person:
    """Disabled: their sign-in refused and every session of theirs ended at once (as
    `users disable`); enabled, they sign in anew. Made an admin, or no longer one."""
    if body.disabled is None and body.admin is None:
        raise Refused("say what changes: disabled, admin or both")
    changed = await storage.change_person(person.id, disabled=body.disabled, admin=body.admin)
    if changed is None:
        raise NotFound(f"no person {person.id}")
    return Person.of(changed, asker)


@router.post("/api/people/{person_id}/reset", status_code=204, responses=errors(404, 409, 422))
async def reset_person(person: SomeoneElse, storage: StorageDep) -> Response:
    """Every session of theirs ended and every API token revoked: they sign in anew,
    wherever they were signed in."""
    await storage.reset_access(person.id)
    return Response(status_code=204)


class NewLink(BaseModel):
    sign_in_link: str
    """The page's address to give them (after the service's own origin), valid for
    LINK_SECONDS and once; only its digest is kept."""


@router.post(
    "/api/people/{person_id}/link",
    status_code=201,
    response_model=NewLink,
    responses=errors(404, 409, 422),
)
async def new_sign_in_link(person: SomeoneElse, storage: StorageDep, guard: GuardDep) -> NewLink:
    """A new one-time sign-in link for someone already added (a forgotten password, or a
    password for one the proxy signed in): opened, they choose their password. Their
    earlier unused link stops working; their password works until the link is used."""
    if person.disabled:
        raise Conflict(f"{person.name} is disabled: enable them first")
    return NewLink(sign_in_link=await sign_in_link(person, storage, guard))


@router.delete("/api/people/{person_id}", status_code=204, responses=errors(404, 409, 422))
async def remove_person(person: SomeoneElse, storage: StorageDep) -> Response:
    """Them and everything of theirs, for good (docs/household.md); 409 for the last admin."""
    await storage.remove_user(person.id, OwnCache(*own_rows(person.id)))
    return Response(status_code=204)


EXPORT_RESPONSE: OpenApiResponses = {
    200: {
        "description": "every conversation of the asker's as one Markdown file",
        "content": {"text/markdown": {"schema": {"type": "string"}}},
    }
}


@router.get("/api/export", responses={**EXPORT_RESPONSE, **errors(401)}, response_class=Response)
async def export_mine(asker: PersonDep, storage: StorageDep) -> Response:
    """The asker's conversations (every one in the single-user modes), newest first, as
    `python -m app export --all` prints them. One that cannot be read is named at the end
    instead of stopping the download."""
    mine: list[Conversation] = []
    unread: list[str] = []
    for entry in await storage.list(owner=asker.id if asker else None):
        try:
            mine.append(await storage.load(entry["id"]))
        except (NotFound, Damaged) as exc:
            unread.append(str(exc))
    # Every answer parsed and written back: about a second for 50 answers of 3 KB.
    text = await asyncio.to_thread(all_as_markdown, mine)
    if unread:
        text += "\n---\n\nNot exported:\n\n" + "".join(f"- {reason}\n" for reason in unread)
    who = asker.name if asker else "all"
    return Response(
        text,
        media_type="text/markdown; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="conversations-{safe(who)}.md"'},
    )


def all_as_markdown(conversations: list[Conversation]) -> str:
    # The export's Markdown parser and writer (a tenth of a second of imports) are imported
    # with the first export, in its thread, not with the service.
    from app.store.export import markdown_all

    return markdown_all(conversations)


def safe(name: str) -> str:
    """A name as a file name in a header: letters, digits, - and _ only."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in name)
