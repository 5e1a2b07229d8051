"""Household mode: who is asking (docs/household.md). On when the database holds at least
one user or AUTH_USER_HEADER is set, decided once at start; then every request that needs
the token needs a person instead: the one a trusted forward-auth proxy names in
AUTH_USER_HEADER, or the one whose session cookie the request carries (signed in with name
and password on the page). Off, the single-user modes are as they were."""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from typing import Any

from app import config
from app.errors import ServiceError
from app.store.errors import Refused
from app.store.storage import Storage
from app.store.users import MAX_NAME_CHARS, User, checked_text

logger = logging.getLogger(__name__)

Refusal = tuple[int, str, dict[str, str]]
PERSON = "person"
"""Where the access check leaves the asker for the routes: scope["state"][PERSON]."""


class NotAPerson(ServiceError):
    """Household mode, and the request is no person's (the access token alone)."""

    status = 401


@dataclass(frozen=True)
class Household:
    """Household mode's settings, for the access check."""

    storage: Storage
    headers: config.ProxyHeaders | None
    trusted: tuple[str, ...]
    """TRUSTED_PROXIES: the only addresses whose AUTH_USER_HEADER is believed."""

    def trusts(self, peer: str) -> bool:
        """Whether the connection comes from one of TRUSTED_PROXIES (an address or a
        network, as uvicorn reads the list)."""
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return peer in self.trusted
        for entry in self.trusted:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        return False

    async def from_proxy(
        self, scope: dict[str, Any] | Any, peer: str, *, needed: bool = True
    ) -> User | Refusal | None:
        """The person AUTH_USER_HEADER names, added on first sight; a refusal (401) for
        the header from anywhere but TRUSTED_PROXIES, or a value that is not one name;
        None when the request does not carry it, or (`needed` false: the page's own
        files) when it is not looked up."""
        if self.headers is None:
            return None
        values = [v for k, v in scope["headers"] if k == self.headers.user]
        if not values:
            return None
        name = proxy_name(values, self.headers.user.decode(), trusted=self.trusts(peer))
        if isinstance(name, tuple):
            logger.warning("refused a request from %s: %s", peer, name[1])
            return name
        if not needed:
            return None
        email, display = (one_value(scope, h) for h in (self.headers.email, self.headers.name))
        known = await self.storage.user(name)
        user = known or await self.storage.seen_user(name, display, email)
        if known is None:
            logger.info("added %s, named by the proxy %s (not an admin)", name, peer)
        if user.disabled:
            return 401, f"{name} is disabled", {}
        return user


def proxy_name(values: list[bytes], header: str, *, trusted: bool) -> str | Refusal:
    if not trusted:
        return 401, f"the {header} header is believed only from TRUSTED_PROXIES", {}
    if len(values) != 1:
        return 401, f"the {header} header came {len(values)} times", {}
    try:
        return checked_text("name", values[0].decode("utf-8"))
    except UnicodeDecodeError:
        return 401, f"the {header} header is not UTF-8", {}
    except Refused as exc:
        return 401, f"the {header} header: {exc}", {}


def one_value(scope: dict[str, Any] | Any, header: bytes | None) -> str | None:
    """A display name or email the proxy sent, when it is one value the store keeps (else
    left out: the person is known by name, these are only shown)."""
    values = [v for k, v in scope["headers"] if k == header] if header else []
    if len(values) != 1 or len(values[0]) > MAX_NAME_CHARS * 4:
        return None
    try:
        return checked_text("value", values[0].decode("utf-8"))
    except (UnicodeDecodeError, Refused):
        return None


def household_mode(
    storage: Storage, headers: config.ProxyHeaders | None, trusted: tuple[str, ...]
) -> Household | None:
    """Decided at start, before the port is served (the storage thread is not running
    yet): on with a user in the database or AUTH_USER_HEADER set. The conversations and
    memory.md of the single-user modes then become the first admin's, said in the log."""
    database = storage.database
    users = database.user_count()
    if headers is None and users == 0:
        logger.info("single-user mode: no user in the database, AUTH_USER_HEADER unset")
        return None
    via = f", and the {headers.user.decode()} header of TRUSTED_PROXIES" if headers else ""
    logger.info("household mode: %d users; sign-in with name and password%s", users, via)
    admin = database.first_admin()
    if admin is None:
        logger.warning(
            "household mode without an admin: conversations of the single-user mode stay "
            "unseen until one is added (python -m app users add NAME --admin) and the "
            "service restarts"
        )
    else:
        adopt(storage, admin)
    return Household(storage, headers, trusted)


def adopt(storage: Storage, admin: User) -> None:
    """What the single-user modes kept, made the first admin's: the conversations with no
    owner, memory.md (DATA_DIR/memory/ID.md from now on) and the models added in Settings."""
    if adopted := storage.database.adopt_conversations(admin.id):
        logger.info("%d conversations of the single-user mode are now %s's", adopted, admin.name)
    if storage.adopt_memory(admin.id):
        logger.info("memory.md of the single-user mode is now %s's", admin.name)
    if adopted := storage.database.adopt_models(admin.id):
        logger.info("models added in the single-user mode (%d) are now %s's", adopted, admin.name)
