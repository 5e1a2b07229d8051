"""What an answer needs from the outside, built once by the web layer: the settings, the
storage, the model server, SearXNG and the one searcher over it (`Services`); and apart,
what is remembered of the model server between answers, its models and their windows
(`ServedModels`) (docs/architecture.md, "The turn")."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from app import config
from app.chat.pending import PendingSaves
from app.chat.runs import Runs
from app.model.client import ModelClient
from app.pages.worker import ExtractionProcess
from app.search.client import Searxng
from app.search.plan import PlanReader
from app.search.searcher import Searcher
from app.search.shares import used_up
from app.store.search_shares import ShareLimits
from app.store.storage import Storage

WINDOW_RETRY_SECONDS = 300.0
MODELS_CACHE_SECONDS = 60.0


@dataclass
class Services:
    """What a turn needs from the outside, built once by the server."""

    settings: config.Settings
    storage: Storage
    model: ModelClient
    searxng: Searxng
    plan: PlanReader
    """The Brave plan our engine writes; `plan.plan_rate` paces the searches."""
    memory_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by every write of memory.md: the Settings editor's and compression's."""
    extraction: ExtractionProcess = field(default_factory=ExtractionProcess)
    pending: PendingSaves = field(default_factory=PendingSaves)
    """Turns' outcomes waiting for the database to answer again (app/chat/pending.py)."""
    runs: Runs = field(init=False)
    """The turns running on this replica, and every reader's way to a turn's events."""
    served: ServedModels = field(init=False)
    """What is remembered of the model server between answers."""
    searcher: Searcher = field(init=False)
    """The one way every search goes (the turns, the lab, whatever else searches): paced
    to the plan's rate with every replica of the database (the turn shared through the
    storage), served from the cache in the database (docs/search-spend.md)."""

    def __post_init__(self) -> None:
        self.runs = Runs(self.storage)
        self.served = ServedModels(self.settings, self.storage, self.model)
        self.searcher = Searcher.of_plan(
            self.searxng,
            self.plan,
            self.storage,
            ttl=lambda: self.settings.search_cache_ttl,
            entries=self.settings.search_cache_entries,
            shared=self.settings.search_cache_shared,
            shares=StoredShares(self.settings, self.storage),
        )


@dataclass(frozen=True)
class StoredShares:
    """The searcher's ShareGate: each person's share kept in the database, the settings'
    limits unless the person has their own."""

    settings: config.Settings
    storage: Storage

    async def spend(self, person: int, queries: int) -> None:
        limits = ShareLimits.default(self.settings)
        refused = await self.storage.spend_search_share(person, queries, limits)
        if refused is not None:
            raise used_up(
                person,
                refused.period,
                refused.used,
                refused.limit,
                refused.queries,
                refused.admins,
            )


@dataclass
class ServedModels:
    """The model server as the service remembers it between answers: the models it lists
    (asked at most once a minute) and the window each is served with."""

    settings: config.Settings
    storage: Storage
    client: ModelClient
    windows: dict[str, tuple[int | None, float]] = field(default_factory=dict)
    listed: tuple[list[str], float] = ([], -MODELS_CACHE_SECONDS)

    async def offers(self, model: str, person: int | None) -> bool:
        """Whether the picker offers this model: configured, listed by the server (asked at
        most once a minute), or added by the person asking (household mode; the one list of
        the single-user modes: None). A turn may use only these, so per-model
        state stays bounded and an invented id never reaches the server."""
        listed, read_at = self.listed
        if time.monotonic() - read_at >= MODELS_CACHE_SECONDS:
            listed = await self.client.models() or []
            self.listed = (listed, time.monotonic())
        if model in self.settings.models or model in listed:
            return True  # without a query: this is on the way to every turn's first token
        return model in await self.storage.models(person)

    async def window(self, model: str) -> int | None:
        """Read once per model. A server that did not say (a hosted API, or one that was
        down) is asked again after a while, not on every turn: each read costs a round trip.
        Ollama's default window is only assumed until the model is loaded, when Ollama says
        the one it really got (OLLAMA_CONTEXT_LENGTH may raise it): read again every turn
        until then."""
        window, read_at = self.windows.get(model, (None, -WINDOW_RETRY_SECONDS))
        unknown = window is None and time.monotonic() - read_at >= WINDOW_RETRY_SECONDS
        ollama = self.client.ollama_windows.get(model)
        if unknown or (ollama is not None and ollama.assumed):
            return await self.reread_window(model)
        return window

    async def reread_window(self, model: str) -> int | None:
        """The served window read now, and remembered: after the user raises it and checks
        again (the Status panel), the next turn budgets against it without a restart."""
        window = await self.client.served_window(model)
        self.windows[model] = (window, time.monotonic())
        return window

    def takes_tools(self, model: str) -> bool:
        """False when the server said, as it read the window, that the model's chat template
        has no tools (llama.cpp): declared, they would be ignored, and no search made."""
        return self.client.template_tools.get(model) is not False

    def window_note(self, model: str) -> str | None:
        """For the context bar: Ollama runs the model in its small default window, which
        cuts a longer prompt from its start without an error, and nothing here can raise it."""
        ollama = self.client.ollama_windows.get(model)
        if ollama is None or not ollama.runs_default:
            return None
        # Not "not loaded": the turn's request loads it, and the note is stored with the turn.
        window = f"{ollama.served} tokens" if ollama.loaded else f"assumed {ollama.served} tokens"
        return (
            f"Ollama runs this model with its default window ({window}) and silently cuts a "
            "longer prompt from its start; raise it with OLLAMA_CONTEXT_LENGTH on the Ollama "
            "server or PARAMETER num_ctx in a Modelfile"
        )
