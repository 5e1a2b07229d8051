"""The page's login: a form that trades the token for an HttpOnly, SameSite=Strict cookie
(docs/security.md). The checks themselves are app/api/access.py's, before any route."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.access import SESSION_COOKIE, SESSION_SECONDS, retry_after
from app.api.deps import GuardDep

router = APIRouter(prefix="/api/session", tags=["session"])


class Login(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str = Field(min_length=1, max_length=1000)


class SessionState(BaseModel):
    auth: bool
    """Whether this service asks for a token at all."""
    signed_in: bool


@router.get("", response_model=SessionState)
async def session_state(request: Request, guard: GuardDep) -> SessionState:
    if guard.sessions is None:
        return SessionState(auth=False, signed_in=True)
    cookie = request.cookies.get(SESSION_COOKIE)
    return SessionState(auth=True, signed_in=bool(cookie and await guard.sessions.valid(cookie)))


@router.post(
    "",
    response_model=SessionState,
    responses={401: {"description": "wrong token"}, 429: {"description": "too many wrong tokens"}},
)
async def sign_in(
    body: Login, request: Request, response: Response, guard: GuardDep
) -> SessionState | Response:
    if guard.sessions is None:
        return SessionState(auth=False, signed_in=True)
    client = request.client.host if request.client else "unknown"
    cookie = await guard.login(body.token, client)
    if cookie is None:
        if (wait := guard.limiter.wait(client)) > 0:
            return json_error(
                429, "too many wrong tokens: wait before trying again", retry_after(wait)
            )
        return json_error(401, "wrong access token")
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
    return SessionState(auth=True, signed_in=True)


@router.delete("", status_code=204)
async def sign_out(request: Request, guard: GuardDep) -> Response:
    """Ends the session in the database, for every replica, then drops the cookie."""
    if guard.sessions is not None and (cookie := request.cookies.get(SESSION_COOKIE)):
        await guard.sessions.end(cookie)
    response = Response(status_code=204)
    response.delete_cookie(
        SESSION_COOKIE,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps({"detail": message}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )
