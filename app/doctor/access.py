"""The access token checked: long enough to guess at no rate."""

from __future__ import annotations

from app import config
from app.doctor.check import Check
from app.store.files import TOKEN_FILE, kept_token


def token_check(settings: config.Settings) -> Check | None:
    """The token serve made at first start under Compose (AUTH_TOKEN empty), for the page's
    sign-in: only its owner can run this command where the data directory is."""
    path = settings.data_dir / TOKEN_FILE
    token = None if settings.auth_token else kept_token(settings.data_dir)
    if token is None:
        return None
    detail = f"{token} (made at first start, kept in {path}; the page's sign-in asks for it)"
    return Check("access_token", "access", "access token", "ok", detail)
