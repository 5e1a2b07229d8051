"""How many /v1 answers run at once (docs/security.md, "One client, many answers").

Every answer holds a connection of the model client's pool (app/transport.py) while it
streams, and the page's turns share that pool: one /v1 client opening a hundred streams to
a slow model made the owner's next turn wait a minute for a connection, then fail as if
the model server had. So each client (an address, or an IPv6 /64) may run at most
V1_ANSWERS_PER_CLIENT answers at once, all /v1 clients together at most V1_TOTAL_ANSWERS,
which leaves PAGE_RESERVED connections of the pool to the page whatever /v1 does; one more
is refused with OpenAI's 429 and a Retry-After, never queued.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from app.api.access import client_key
from app.errors import ServiceError
from app.transport import MAX_CONNECTIONS

logger = logging.getLogger(__name__)

PAGE_RESERVED = 40
V1_TOTAL_ANSWERS = MAX_CONNECTIONS - PAGE_RESERVED
RETRY_AFTER_SECONDS = 5


class Busy(ServiceError):
    """A /v1 answer refused for now: OpenAI's rate-limit error, with a Retry-After."""

    status = 429
    code = "rate_limit_exceeded"
    param = None
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}


@dataclass
class Slot:
    """One answer's place; released once, however the answer ends."""

    slots: AnswerSlots
    client: str
    held: bool = True

    async def release(self) -> None:
        if self.held:
            self.held = False
            self.slots.running[self.client] -= 1
            self.slots.total -= 1
            if not self.slots.running[self.client]:
                del self.slots.running[self.client]


class AnswerSlots:
    """The /v1 answers running, per client and in all."""

    def __init__(self, per_client: int) -> None:
        self.per_client = per_client
        self.running: Counter[str] = Counter()
        self.total = 0

    def take(self, address: str) -> Slot:
        client = client_key(address)
        if self.running[client] >= self.per_client:
            logger.warning("refused a /v1 answer to %s: %d running", address, self.per_client)
            raise Busy(
                f"this client already has {self.per_client} answers running "
                "(V1_ANSWERS_PER_CLIENT): wait for one to end"
            )
        if self.total >= V1_TOTAL_ANSWERS:
            logger.warning("refused a /v1 answer to %s: %d running in all", address, self.total)
            raise Busy(
                f"{self.total} /v1 answers are running, the most the service runs at once "
                "beside the page's own: try again shortly"
            )
        self.running[client] += 1
        self.total += 1
        return Slot(self, client)
