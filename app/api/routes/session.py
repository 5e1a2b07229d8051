"""The page's login: a form that trades the token, or in household mode a person's name and
password (docs/household.md), for an HttpOnly, SameSite=Strict cookie (docs/security.md).
The checks themselves are app/api/access.py's, before any route."""

from __future__ import annotations

import asyncio
import json

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.access import (
    SESSION_COOKIE,
    SESSION_SECONDS,
    TOO_MANY_WRONG,
    Guard,
    retry_after,
    state_person,
)
from app.api.bodies import REFUSALS
from app.api.deps import GuardDep
from app.store.passwords import MAX_PASSWORD_CHARS, hash_password
from app.store.users import MAX_NAME_CHARS

router = APIRouter(prefix="/api/session", tags=["session"], responses=REFUSALS)


class Login(BaseModel):
    """The token, or in household mode a name and a password."""

    model_config = ConfigDict(extra="forbid")
    token: str | None = Field(None, min_length=1, max_length=1000)
    name: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS)
    password: str | None = Field(None, min_length=1, max_length=MAX_PASSWORD_CHARS)
    link: str | None = Field(None, min_length=1, max_length=1000)
    """Household mode: a one-time sign-in link's token, with the password its person
    chooses (then no name)."""


class SessionState(BaseModel):
    auth: bool
    """Whether this service asks for a token (or a person) at all."""
    signed_in: bool
    household: bool | None = None
    """Household mode: true, the sign-in takes a name and a password (absent otherwise)."""
    person: str | None = None
    """Household mode: who is signed in (their display name, else their name)."""
    admin: bool | None = None
    """Household mode: true for an admin, who may manage the household (the page's
    People); absent otherwise."""
    password: bool | None = None
    """Household mode: true when the person signs in with a password of the stack's, which
    they may change (PUT /api/password); absent for one the proxy names."""


@router.get("", response_model=SessionState, response_model_exclude_none=True)
async def session_state(request: Request, guard: GuardDep) -> SessionState:
    if guard.sessions is None:
        return SessionState(auth=False, signed_in=True)
    cookie = request.cookies.get(SESSION_COOKIE)
    if guard.household is not None:
        person = state_person(request.scope)
        if person is None and cookie:
            person = await guard.sessions.person(cookie)
        shown = (person.display_name or person.name) if person else None
        admin = True if person and person.admin else None
        password = True if person and person.password else None
        return SessionState(
            auth=True,
            signed_in=bool(person),
            household=True,
            person=shown,
            admin=admin,
            password=password,
        )
    return SessionState(auth=True, signed_in=bool(cookie and await guard.sessions.valid(cookie)))


@router.post(
    "",
    response_model=SessionState,
    response_model_exclude_none=True,
    responses={
        401: {"description": "wrong token, or wrong name or password"},
        429: {"description": "too many wrong tries from this address"},
    },
)
async def sign_in(
    body: Login, request: Request, response: Response, guard: GuardDep
) -> SessionState | Response:
    if guard.sessions is None:
        return SessionState(auth=False, signed_in=True)
    client = request.client.host if request.client else "unknown"
    if guard.household is not None and body.link is not None:
        if body.password is None:
            return json_error(422, "choose a password to sign in with the link")
        cookie = await first_sign_in(guard, body.link, body.password, client)
        wrong = "this sign-in link was used already, has expired, or is not one"
    elif guard.household is not None:
        if body.name is None or body.password is None:
            return json_error(422, "sign in with a name and a password")
        cookie = await guard.sign_in(body.name, body.password, client)
        wrong = "wrong name or password"
    elif body.token is None:
        return json_error(422, "sign in with the access token")
    else:
        cookie = await guard.login(body.token, client)
        wrong = "wrong access token"
    if cookie is None:
        if (wait := guard.limiter.wrong(client)) > 0:
            return json_error(429, TOO_MANY_WRONG, retry_after(wait))
        return json_error(401, wrong)
    # The scheme is the request's as uvicorn saw it: https behind a proxy only when the
    # proxy is one of TRUSTED_PROXIES (its X-Forwarded-Proto is believed from no one else).
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    household = True if guard.household is not None else None
    return SessionState(auth=True, signed_in=True, household=household)


async def first_sign_in(guard: Guard, link: str, password: str, client: str) -> str | None:
    """Household mode: a one-time sign-in link traded for the password its person chooses
    (Refused, 400, for one too short: the link is kept) and a session cookie; None for a
    link used, expired or unknown (counted by the caller, as a wrong password is)."""
    assert guard.household is not None and guard.sessions is not None
    hashed = await asyncio.to_thread(hash_password, password)
    key = guard.sessions.stored_key(link)
    person = None if key is None else await guard.household.storage.use_sign_in_link(key, hashed)
    if person is None:
        return None
    guard.limiter.forget(client)
    return await guard.sessions.issue(person.id)


@router.delete("", status_code=204)
async def sign_out(request: Request, guard: GuardDep) -> Response:
    """Ends the session in the database, for every replica, then drops the cookie."""
    if guard.sessions is not None and (cookie := request.cookies.get(SESSION_COOKIE)):
        await guard.sessions.end(cookie)
    response = Response(status_code=204)
    drop_cookie(request, response)
    return response


def drop_cookie(request: Request, response: Response) -> None:
    """The session cookie gone from the browser, with the attributes it was set with."""
    response.delete_cookie(
        SESSION_COOKIE,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps({"detail": message}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )
