"""The database for the service (SQLite in DATA_DIR, or PostgreSQL at DATABASE_URL): one
thread owns the connection and runs every query in the order they were asked, so no
request waits on the event loop for the disk, and a write asked for before another lands
before it (a turn's outcome before its lease is released).
Each query of the service is a typed async method here. See docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ParamSpec, TypeVar

import anyio

from app.store.database import DATABASE, Database
from app.store.errors import Busy, Damaged, Unavailable
from app.store.files import (
    adopt_memory,
    forget_memory,
    memory_file,
    memory_text,
    remove_leftovers,
    write_atomic,
)
from app.store.leases import LEASE_SECONDS, new_owner
from app.store.nul import without_nul
from app.store.rows import (
    Conversation,
    ConversationRow,
    EditAt,
    Entry,
    Message,
    OutcomeWrite,
    StoredSettings,
    ToolRefusal,
    Totals,
)
from app.store.search_cache import CachedSearch, OwnCache
from app.store.search_pace import SearchPace, SearchTurn
from app.store.search_shares import Limit, PersonShare, ShareLimits, ShareRefused
from app.store.searches import SearchesSpent
from app.store.sessions import AccessReset, ApiToken, PersonSession
from app.store.turn_events import Asked, KeptEvents, KeptRow
from app.store.users import NewUser, RemovedUser, User

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class Storage:
    """Each query runs in Storage's own thread, awaited without blocking the event loop and
    never cut short by a cancellation (Stop), so a write that was asked for is made. The
    methods below are Database's, with the same arguments (their docstrings are there)."""

    def __init__(
        self, root: Path, *, database_url: str = "", turn_digests: int | None = None
    ) -> None:
        """`root`: DATA_DIR (memory.md, the people's memory/, and chat.db unless
        `database_url` names a PostgreSQL database)."""
        self.root = root
        self.turn_digests = turn_digests
        """How many of the latest answers' digests a turn reads (KEEP_SOURCES_TURNS); all
        when None."""
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage")
        self.database = Database(database_url or root / DATABASE)
        """Used by the storage thread alone once the service runs."""

    async def run(self, query: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`query` in the storage thread, after what was asked before it."""
        future = asyncio.get_running_loop().run_in_executor(
            self.thread, partial(query, *args, **kwargs)
        )
        with anyio.CancelScope(shield=True):
            result = await asyncio.shield(future)
        return result

    def open(self) -> None:
        """At start: import old files, remove temporary files a crash left mid-write and
        the conversations left with no message."""
        self.database.import_files(self.root)
        if dropped := self.database.drop_empty():
            logger.info("removed %d conversations with no message", dropped)
        if leftovers := remove_leftovers(self.root):
            logger.info("removed %d temporary files left by a crash", leftovers)

    def close(self) -> None:
        self.thread.shutdown(wait=True)
        self.database.close()

    async def ping(self) -> DatabaseHealth:
        """Which database, and whether it answers now: asked beside the storage thread (a
        slow query there does not make the database look down)."""
        dialect = self.database.dialect
        answers = await asyncio.to_thread(dialect.ping)
        return DatabaseHealth(backend=dialect.backend, answers=answers)

    # -- a turn ---------------------------------------------------------------------------

    async def begin_turn(
        self, conversation_id: str, message: str | None, model: str, *, edit: EditAt | None = None
    ) -> tuple[Lease, TurnInput]:
        """The conversation for one turn, its message written (see Database.begin_turn), and
        what the turn reads, in one trip to this thread: it is the wait before the model is
        asked. The lease is renewed until released. Busy if a turn holds the conversation."""
        owner = new_owner()
        start = await self.run(self.started, conversation_id, owner, message, model, edit)
        if start is None:
            raise Busy("a turn is already running in this conversation")
        lease = Lease(self, conversation_id, owner)
        lease.renewal = asyncio.create_task(lease.keep())
        return lease, start

    def started(
        self,
        conversation_id: str,
        owner: str,
        message: str | None,
        model: str,
        edit: EditAt | None,
    ) -> TurnInput | None:
        conversation = self.database.begin_turn(
            conversation_id, owner, message, model, self.turn_digests, edit=edit
        )
        if conversation is None:
            return None
        self.database.open_run(conversation_id, owner)
        refusal = self.database.tool_refusal(model)
        keeps = message is None or edit is not None
        person = self.database.owner(conversation_id)
        try:
            memory = memory_text(memory_file(self.root, person))
        except Damaged as exc:
            return TurnInput(conversation, refusal, "", exc, person, keeps)
        return TurnInput(conversation, refusal, memory, None, person, keeps)

    async def digests(self, conversation_id: str, start: int, end: int) -> dict[int, str]:
        return await self.run(self.database.digests, conversation_id, start, end)

    async def put_message(self, conversation_id: str, position: int, message: Message) -> None:
        await self.run(self.database.put_message, conversation_id, position, message)

    async def drop_message(self, conversation_id: str, position: int) -> None:
        await self.run(self.database.drop_message, conversation_id, position)

    async def save_outcome(self, conversation_id: str, outcome: OutcomeWrite, owner: str) -> Totals:
        return await self.run(self.database.save_outcome, conversation_id, outcome, owner)

    async def hold_for_outcome(
        self, conversation_id: str, owner: str, position: int, asked: str
    ) -> bool:
        return await self.run(
            self.database.hold_for_outcome, conversation_id, owner, position, asked
        )

    async def renew(self, conversation_id: str, owner: str) -> bool:
        return await self.run(self.database.renew, conversation_id, owner)

    async def release(self, conversation_id: str, owner: str) -> None:
        await self.run(self.database.release, conversation_id, owner)

    # -- a turn's kept events (turn_events.py) ---------------------------------------------

    async def keep_events(
        self, conversation_id: str, owner: str, rows: list[KeptRow], *, ended: bool
    ) -> Asked:
        return await self.run(self.database.keep_events, conversation_id, owner, rows, ended=ended)

    async def asked(self, conversation_id: str, owner: str) -> Asked:
        return await self.run(self.database.asked, conversation_id, owner)

    async def ask_stop(self, conversation_id: str) -> bool:
        return await self.run(self.database.ask_stop, conversation_id)

    async def plan_waits(self, conversation_id: str, owner: str) -> None:
        await self.run(self.database.plan_waits, conversation_id, owner)

    async def plan_waited(self, conversation_id: str, owner: str) -> list[str] | None:
        return await self.run(self.database.plan_waited, conversation_id, owner)

    async def start_plan(self, conversation_id: str, questions: list[str]) -> bool:
        return await self.run(self.database.start_plan, conversation_id, questions)

    async def turn_events(self, conversation_id: str, after: int) -> KeptEvents:
        return await self.run(self.database.turn_events, conversation_id, after)

    # -- memory.md ------------------------------------------------------------------------

    async def read_memory(self, person: int | None) -> str:
        """`person`'s memory.md (a users rowid; None: the single-user modes')."""
        return await self.run(memory_text, memory_file(self.root, person))

    async def write_memory(self, text: str, person: int | None) -> str:
        """`person`'s memory.md replaced by `text`, without NUL as every text the database
        keeps (nul.py); what it now holds."""
        kept = without_nul(text)
        await self.run(write_atomic, memory_file(self.root, person), kept)
        return kept

    def adopt_memory(self, person: int) -> bool:
        """At start, before the storage thread runs: see files.adopt_memory."""
        return adopt_memory(self.root, person)

    # -- the picker's models --------------------------------------------------------------

    async def models(self, person: int | None) -> list[str]:
        return await self.run(self.database.models, person)

    async def set_models(self, models: list[str], person: int | None) -> None:
        await self.run(self.database.set_models, models, person)

    async def count_search(self) -> None:
        await self.run(self.database.count_search)

    async def searches_spent(self) -> SearchesSpent:
        return await self.run(self.database.searches_spent)

    # -- the page's sessions ---------------------------------------------------------------

    async def add_session(self, key: str, expires: float, person: int | None = None) -> None:
        await self.run(self.database.add_session, key, expires, person)

    async def session_live(self, key: str) -> bool:
        return await self.run(self.database.session_live, key)

    async def session_user(self, key: str) -> User | None:
        return await self.run(self.database.session_user, key)

    async def end_session(self, key: str) -> None:
        await self.run(self.database.end_session, key)

    async def person_sessions(self, person: int) -> list[PersonSession]:
        return await self.run(self.database.person_sessions, person)

    async def end_person_session(self, person: int, session: str) -> bool:
        return await self.run(self.database.end_person_session, person, session)

    async def end_other_sessions(self, person: int, kept: str) -> int:
        return await self.run(self.database.end_other_sessions, person, kept)

    async def add_token(self, key: str, token_id: str, person: int, label: str) -> ApiToken:
        return await self.run(self.database.add_token, key, token_id, person, label)

    async def person_tokens(self, person: int) -> list[ApiToken]:
        return await self.run(self.database.person_tokens, person)

    async def revoke_token(self, person: int, token_id: str) -> bool:
        return await self.run(self.database.revoke_token, person, token_id)

    async def token_owner(self, key: str) -> User | None:
        return await self.run(self.database.token_owner, key)

    async def reset_access(self, person: int) -> AccessReset:
        return await self.run(self.database.reset_access, person)

    async def tool_refusals(self) -> list[ToolRefusal]:
        return await self.run(self.database.tool_refusals)

    async def tool_refusal(self, model: str) -> ToolRefusal | None:
        return await self.run(self.database.tool_refusal, model)

    async def refuse_tools(self, model: str, reason: str) -> ToolRefusal:
        return await self.run(self.database.refuse_tools, model, reason)

    async def forget_tool_refusal(self, model: str) -> bool:
        return await self.run(self.database.forget_tool_refusal, model)

    # -- the search cache (app/search/cache.py's CacheStore) -----------------------------

    async def cached_search(self, key: str) -> CachedSearch | None:
        return await self.run(self.database.cached_search, key)

    async def keep_search(self, key: str, response: str, entries: int) -> None:
        await self.run(self.database.keep_search, key, response, entries)

    async def clear_search_cache(self, own: tuple[str, str] | None) -> int:
        return await self.run(self.database.clear_search_cache, OwnCache(*own) if own else None)

    # -- the search plan's turn, shared by the replicas (app/search/governor.py's PaceStore)

    async def take_search_turn(self, owner: str, hold: float) -> SearchTurn:
        return await self.run(self.database.take_search_turn, owner, hold)

    async def end_search_turn(self, owner: str, pause: float) -> None:
        await self.run(self.database.end_search_turn, owner, pause)

    async def search_pace(self, owner: str) -> SearchPace:
        return await self.run(self.database.search_pace, owner)

    # -- each person's share of the plan (search_shares.py) ---------------------------------

    async def spend_search_share(
        self, person: int, queries: int, defaults: ShareLimits
    ) -> ShareRefused | None:
        return await self.run(self.database.spend_search_share, person, queries, defaults)

    async def search_share(self, name: str, defaults: ShareLimits) -> PersonShare | None:
        return await self.run(self.database.search_share, name, defaults)

    async def search_shares(self, defaults: ShareLimits) -> list[PersonShare]:
        return await self.run(self.database.search_shares, defaults)

    async def set_search_limits(
        self, name: str, daily: Limit | None, monthly: Limit | None
    ) -> bool:
        return await self.run(self.database.set_search_limits, name, daily, monthly)

    # -- the household (users.py) ----------------------------------------------------------

    async def user(self, name: str) -> User | None:
        return await self.run(self.database.user, name)

    async def user_count(self) -> int:
        return await self.run(self.database.user_count)

    async def seen_user(self, name: str, display_name: str | None, email: str | None) -> User:
        return await self.run(self.database.seen_user, name, display_name, email)

    async def first_admin(self) -> User | None:
        return await self.run(self.database.first_admin)

    async def adopt_conversations(self, owner: int) -> int:
        return await self.run(self.database.adopt_conversations, owner)

    async def users(self) -> list[User]:
        return await self.run(self.database.users)

    async def person(self, person_id: int) -> User | None:
        return await self.run(self.database.person, person_id)

    async def add_user(self, new: NewUser) -> User:
        return await self.run(self.database.add_user, new)

    async def change_person(
        self, person_id: int, *, disabled: bool | None = None, admin: bool | None = None
    ) -> User | None:
        return await self.run(
            self.database.change_person, person_id, disabled=disabled, admin=admin
        )

    async def add_sign_in_link(self, person_id: int, key: str, expires: float) -> None:
        await self.run(self.database.add_sign_in_link, person_id, key, expires)

    async def use_sign_in_link(self, key: str, password: str) -> User | None:
        return await self.run(self.database.use_sign_in_link, key, password)

    async def change_password(self, person: int, password: str, kept: str) -> int:
        return await self.run(self.database.change_password, person, password, kept)

    async def remove_user(self, person_id: int, cache: OwnCache) -> RemovedUser:
        """Database.remove_user, then their memory.md once that has committed."""
        return await self.run(self.removed, person_id, cache)

    def removed(self, person_id: int, cache: OwnCache) -> RemovedUser:
        removed = self.database.remove_user(person_id, cache)
        forget_memory(self.root, person_id)
        return removed

    # -- conversations --------------------------------------------------------------------

    async def create(
        self, title: str, settings: StoredSettings, owner: int | None = None
    ) -> Conversation:
        return await self.run(self.database.create, title, settings, owner)

    async def owner(self, conversation_id: str) -> int | None:
        return await self.run(self.database.owner, conversation_id)

    async def load(self, conversation_id: str) -> Conversation:
        return await self.run(self.database.load, conversation_id)

    async def row(self, conversation_id: str) -> ConversationRow:
        return await self.run(self.database.row, conversation_id)

    async def settings(self, conversation_id: str) -> StoredSettings:
        return await self.run(self.database.settings, conversation_id)

    async def change(
        self, conversation_id: str, title: str | None, settings: StoredSettings
    ) -> Conversation:
        return await self.run(self.database.change, conversation_id, title, settings)

    async def delete(self, conversation_id: str) -> None:
        await self.run(self.database.delete, conversation_id)

    async def switch_version(self, conversation_id: str, position: int, index: int) -> Conversation:
        return await self.run(self.database.switch_version, conversation_id, position, index)

    async def rewind(self, conversation_id: str) -> str:
        return await self.run(self.database.rewind, conversation_id)

    # Last: below it, `list` in an annotation would name this method.
    async def list(self, query: str = "", owner: int | None = None) -> list[Entry]:
        return await self.run(self.database.list, query, owner)


@dataclass(frozen=True)
class DatabaseHealth:
    """For /healthz: "sqlite" or "postgresql", and whether it answered (nothing private)."""

    backend: str
    answers: bool


@dataclass
class TurnInput:
    """What a turn reads before it starts."""

    conversation: Conversation
    """Its messages without their details (see Database.load)."""
    refusal: ToolRefusal | None
    """The model refused the tools in an earlier turn."""
    memory: str
    memory_damaged: Damaged | None
    """memory.md could not be read (and `memory` is empty)."""
    person: int | None
    """Whose memory.md it is: the conversation's owner (None in the single-user modes)."""
    keeps_message: bool = False
    """Regenerate and Edit: a failure before any output leaves the message unanswered
    rather than taking it back (what they replaced is a version to go back to)."""


@dataclass
class Lease:
    storage: Storage
    conversation_id: str
    owner: str
    renewal: asyncio.Task[None] | None = None
    released: bool = False
    pending: bool = False
    """The turn's outcome waits for the database to answer again (app/chat/pending.py),
    which writes it with the lease: the stream's end leaves the lease alone."""

    async def keep(self) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            try:
                renewed = await self.storage.renew(self.conversation_id, self.owner)
            except Unavailable:  # renewed again once the database answers, if still ours
                continue
            if not renewed and not self.released:  # not released meanwhile by its outcome
                logger.warning(
                    "lost the lease of %s (expired and taken over)", self.conversation_id
                )
                return

    async def release(self) -> None:
        """Idempotent; only this owner's row goes."""
        if self.released or self.pending:
            return
        self.dropped()
        try:
            await self.storage.release(self.conversation_id, self.owner)
        except Unavailable as exc:
            logger.warning("the lease of %s stays until it expires: %s", self.conversation_id, exc)

    def dropped(self) -> None:
        """The row is gone (the turn's outcome was written with it): stop renewing."""
        self.released = True
        if self.renewal:
            self.renewal.cancel()
            # Its frame holds this lease: kept, the pair would be a cycle for the collector.
            self.renewal = None
