"""Household mode's account, for the signed-in person (docs/household.md): their password
(changed with the current one given), their sessions (listed, ended one by one or all but
this browser's) and their personal API tokens (made with a label and shown once, listed
without the token, revoked one by one), and signing out everywhere, which ends every
session and revokes every token of theirs at once."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from app.api.access import SESSION_COOKIE, SESSION_SECONDS, TOO_MANY_WRONG, by_token, retry_after
from app.api.bodies import REFUSALS, errors, refused
from app.api.deps import GuardDep, PersonDep, StorageDep
from app.api.routes.session import drop_cookie
from app.store.passwords import MAX_PASSWORD_CHARS, hash_password, password_matches
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
    last_used: str | None
    """ISO 8601, UTC, kept to the minute (None: not used since it was made)."""
    this_browser: bool
    """The session of the request that asked."""


class Ended(BaseModel):
    sessions: int
    tokens: int = 0


class PasswordChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    current: str = Field(max_length=MAX_PASSWORD_CHARS)
    """The password the person signs in with now."""
    password: str = Field(max_length=MAX_PASSWORD_CHARS)
    """The new one (at least 8 characters)."""


@router.put("/password", responses=errors(400, 401, 403, 404, 409, 422, 429))
async def change_password(
    body: PasswordChange, request: Request, guard: GuardDep, storage: StorageDep, person: Account
) -> Ended:
    """The person's own password, the current one given (a browser left signed in is not
    the account); every other session of theirs ends, this browser stays signed in. A wrong
    current password counts as a wrong sign-in from this address and is limited alike (the
    right one first, as at the sign-in)."""
    if person.password is None:
        raise refused("you sign in through the home lab's login: there is no password here", 409)
    client = request.client.host if request.client else "unknown"
    if not await asyncio.to_thread(password_matches, person.password, body.current):
        if (wait := guard.limiter.wrong(client)) > 0:
            raise HTTPException(429, TOO_MANY_WRONG, headers=retry_after(wait))
        raise refused("the current password is wrong", 403)
    hashed = await asyncio.to_thread(hash_password, body.password)  # Refused (400): too short
    kept = current_key(request, guard) or ""
    return Ended(sessions=await storage.change_password(person.id, hashed, kept))


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
            last_used=live.last_used,
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
