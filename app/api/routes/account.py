"""Household mode's account, for the signed-in person (docs/household.md): their sessions
(listed, ended one by one or all but this browser's) and their personal API tokens (made
with a label and shown once, listed without the token, revoked one by one), and signing out
everywhere, which ends every session and revokes every token of theirs at once."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from app.api.access import SESSION_COOKIE, SESSION_SECONDS, by_token
from app.api.bodies import REFUSALS, errors, refused
from app.api.deps import GuardDep, PersonDep, StorageDep
from app.api.routes.session import drop_cookie
from app.store.sessions import AccessReset, ApiToken
from app.store.users import MAX_NAME_CHARS, User, checked_text

router = APIRouter(prefix="/api", tags=["account"], responses=REFUSALS)

ID = Annotated[str, PathParam(pattern="^[0-9a-f]{16}$", description="a token or session id")]


async def account_of(request: Request, asker: PersonDep) -> User:
    """The signed-in person: 404 outside household mode, 403 for a personal token's request
    (a token that could make tokens would outlive its own revocation)."""
    if asker is None:
        raise refused("there are no accounts: the service is in single-user mode", 404)
    if by_token(request.scope):
        raise refused("sessions and tokens are managed from the page, signed in", 403)
    return asker


Account = Annotated[User, Depends(account_of)]


class TokenLabel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    """What the person calls it (the laptop's Open WebUI, Claude Desktop)."""


class NewToken(BaseModel):
    """A token just made: the only answer that ever holds the token."""

    id: str
    label: str
    created: str
    last_used: str | None
    token: str


class SessionListed(BaseModel):
    id: str
    created: float
    """Unix seconds."""
    expires: float
    this_browser: bool
    """The session of the request that asked."""


class Ended(BaseModel):
    sessions: int
    tokens: int = 0


@router.get("/tokens", responses=errors(401, 403, 404))
async def list_tokens(storage: StorageDep, person: Account) -> list[ApiToken]:
    return await storage.person_tokens(person.id)


@router.post("/tokens", status_code=201, responses=errors(401, 403, 404, 422))
async def make_token(body: TokenLabel, guard: GuardDep, person: Account) -> NewToken:
    label = checked_text("label", body.label)
    assert guard.tokens is not None  # household mode, or account_of refused
    token, made = await guard.tokens.issue(person.id, label)
    return NewToken(id=made.id, label=made.label, created=made.created, last_used=None, token=token)


@router.delete("/tokens/{token_id}", status_code=204, responses=errors(401, 403, 404))
async def revoke_token(token_id: ID, storage: StorageDep, person: Account) -> Response:
    if not await storage.revoke_token(person.id, token_id):
        raise refused(f"no token {token_id}", 404)
    return Response(status_code=204)


def current_key(request: Request, guard: GuardDep) -> str | None:
    cookie = request.cookies.get(SESSION_COOKIE)
    return guard.sessions.stored_key(cookie) if guard.sessions and cookie else None


@router.get("/sessions", responses=errors(401, 403, 404))
async def list_sessions(
    request: Request, guard: GuardDep, storage: StorageDep, person: Account
) -> list[SessionListed]:
    mine = current_key(request, guard)
    return [
        SessionListed(
            id=live.id,
            created=live.expires - SESSION_SECONDS,
            expires=live.expires,
            this_browser=live.key == mine,
        )
        for live in await storage.person_sessions(person.id)
    ]


@router.delete("/sessions/{session_id}", status_code=204, responses=errors(401, 403, 404))
async def end_session(session_id: ID, storage: StorageDep, person: Account) -> Response:
    if not await storage.end_person_session(person.id, session_id):
        raise refused(f"no session {session_id}", 404)
    return Response(status_code=204)


@router.delete("/sessions", responses=errors(401, 403, 404))
async def end_other_sessions(
    request: Request, guard: GuardDep, storage: StorageDep, person: Account
) -> Ended:
    """Signs out every other browser of the person's; this one stays signed in."""
    kept = current_key(request, guard) or ""
    return Ended(sessions=await storage.end_other_sessions(person.id, kept))


@router.delete("/access", responses=errors(401, 403, 404))
async def sign_out_everywhere(
    request: Request, response: Response, storage: StorageDep, person: Account
) -> Ended:
    """Every session of the person's ended (this browser's too) and every token revoked."""
    ended: AccessReset = await storage.reset_access(person.id)
    drop_cookie(request, response)
    return Ended(sessions=ended.sessions, tokens=ended.tokens)
