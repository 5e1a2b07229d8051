"""Each part of the stack checked, with what to fix: `python -m app doctor` and the page's
Status panel (app/api/routes/status.py).

The checks are split by what they cost. The free ones (SearXNG reachable, our engine
loaded, JSON on; the model server's list and served window) send no search and generate
nothing. The tool-calling check makes the model answer a tiny request. The Brave key check
runs one real search, which spends one query of the user's Brave plan: the page runs it
only when asked; the command line runs everything.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Literal

import httpx

from app import config
from app.chat.web_search import WEB_SEARCH
from app.model.client import ModelClient, safe_json
from app.model.failures import Failure, LLMError
from app.model.windows import OllamaWindow
from app.search.client import Counter, SearchError, Searxng
from app.search.failures import EngineFailure
from app.search.plan import Plan, PlanReader, summary
from app.search.searcher import Searcher
from app.store.database import Database, stored
from app.store.files import TOKEN_FILE
from app.store.rows import ToolRefusal
from app.store.searches import SearchesSpent

State = Literal["ok", "warning", "fail"]
Part = Literal["searxng", "engine", "model", "access"]

QUICK_TIMEOUT = 5.0
"""Seconds for each free check's request (a healthy local service answers in milliseconds)."""
SEARCH_TIMEOUT = 15.0
"""Seconds for the Brave key's search: SearXNG waits for the engine, which waits for Brave."""
TOOL_TIMEOUT = 20.0
"""Seconds for the tool-calling request: a local server may first load the model."""
SMALL_WINDOW = 8192
"""A served window below this many tokens gets a warning: conversations compress early."""

SEARXNG_FIX = "start it (python -m app searxng, docker compose up) or fix SEARXNG_URL"
NOT_SEARXNG_FIX = "SEARXNG_URL must be the address of SearXNG itself (its /config answers JSON)"
KEY_FIX = "set BRAVE_API_KEY (for SearXNG) to a valid Brave Search API key"
NO_KEY_FIX = (
    "set BRAVE_API_KEY in .env, then restart SearXNG (make run again, or docker compose "
    "up -d --force-recreate searxng-settings searxng chat)"
)
PLAN_FIX = (
    "searches resume when Brave's window resets (the month's: on the date shown); for more "
    "queries, a larger plan at api-dashboard.search.brave.com; SEARCH_RATE paces searches"
)
SUSPENDED_FIX = (
    "SearXNG resumes the engine by itself when the suspension ends; key-free engines get "
    "blocked after a few dozen queries: set BRAVE_API_KEY for a reliable source"
)
# What Brave answers a key it does not take: 422 SUBSCRIPTION_TOKEN_INVALID, or 401 / 403.
REJECTED_KEY = re.compile(r"SUBSCRIPTION_TOKEN_INVALID|Brave API (401|403)\b")


def engine_error_fix(url: str) -> str:
    """For an engine error that is not a rejected key: the address, the path to it, and
    where SearXNG keeps the engine's own words."""
    return (
        "not a key problem: SearXNG's engine could not use the Brave API. Check BRAVE_API_URL "
        "(empty: the official API; a plain-http one, such as a proxy's, needs SearXNG's "
        "settings rendered with it), that SearXNG reaches it over the network, and "
        f"{url.rstrip('/')}/stats/errors for the engine's own error"
    )


MODEL_URL_FIX = "start the model server or fix LLM_BASE_URL (it ends with /v1)"
WINDOW_FIX = (
    "raise it (Ollama: num_ctx / OLLAMA_CONTEXT_LENGTH; llama-server: --ctx-size), then check again"
)
# Ollama's /v1 API takes no window size (docs/api/openai-compatibility.mdx, "Setting the
# context size"), so MODEL_PARAMS cannot raise it: only the server or the model can.
OLLAMA_WINDOW_FIX = (
    "start Ollama with OLLAMA_CONTEXT_LENGTH=32768 (or more; its environment, e.g. "
    "`OLLAMA_CONTEXT_LENGTH=32768 ollama serve`, the systemd unit or the container), or make "
    "a model with a Modelfile of `FROM {model}` and `PARAMETER num_ctx 32768` (`ollama create "
    "{model}-32k -f Modelfile`) and use that; MODEL_PARAMS cannot set it (Ollama's /v1 API "
    "has no window size). Then check again"
)


@dataclass
class Check:
    """One check's outcome. `ok` (not failed) is what the command line prints and exits on."""

    id: str
    part: Part
    name: str
    state: State
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.state != "fail"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def describe(exc: Exception) -> str:
    """'ConnectError: All connection attempts failed', or the class alone when it says nothing."""
    return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__


def first_failure(checks: list[Check]) -> Check | None:
    return next((check for check in checks if check.state == "fail"), None)


# -- SearXNG and our engine --------------------------------------------------------------------


async def searxng_free_checks(url: str, *, timeout: float = QUICK_TIMEOUT) -> list[Check]:
    """SearXNG reachable, our engine loaded and enabled, JSON on: no search is run.

    JSON is checked with a ``format=json`` request without a query, which SearXNG answers
    before any engine runs: 400 with a JSON error ("No query") when JSON is on, 403 when
    json is missing from search.formats (searx/webapp.py, ``search()``).
    """
    url = url.rstrip("/")
    name = "SearXNG reachable"
    async with httpx.AsyncClient(timeout=timeout) as http:
        try:
            health = await http.get(f"{url}/healthz")
        except httpx.HTTPError as exc:
            detail = f"{url}: no connection ({describe(exc)})"
            return [Check("searxng_reachable", "searxng", name, "fail", detail, SEARXNG_FIX)]
        if health.status_code != 200:
            detail = f"{url}/healthz answered HTTP {health.status_code}"
            return [Check("searxng_reachable", "searxng", name, "fail", detail, NOT_SEARXNG_FIX)]
        reachable = Check("searxng_reachable", "searxng", name, "ok", url)
        return [reachable, *await asyncio.gather(engine_check(http, url), json_check(http, url))]


async def engine_check(http: httpx.AsyncClient, url: str) -> Check:
    name = f"engine {config.ENGINE_NAME} loaded"

    def engine(state: State, detail: str, fix: str = "") -> Check:
        return Check("engine_loaded", "engine", name, state, detail, fix)

    try:
        response = await http.get(f"{url}/config")
        engines = {e["name"]: e for e in response.json().get("engines", [])}
    except httpx.HTTPError as exc:
        return engine("fail", f"/config: {exc.__class__.__name__}", SEARXNG_FIX)
    except (ValueError, KeyError, TypeError, AttributeError):
        detail = f"{url}/config did not answer SearXNG's JSON (HTTP {response.status_code})"
        return engine("fail", detail, NOT_SEARXNG_FIX)
    ours = engines.get(config.ENGINE_NAME)
    listed = ", ".join(sorted(engines)) or "no engine"
    if ours is None:
        fix = "mount searxng-engines/brave_api.py in searx/engines/ and read SearXNG's log"
        return engine("fail", f"SearXNG has: {listed}", fix)
    others = sorted(n for n, e in engines.items() if n != config.ENGINE_NAME and e.get("enabled"))
    if ours.get("enabled") is False and others:
        # What app/search/embedded.py renders when there is no Brave API key.
        detail = (
            f"no Brave API key: {config.ENGINE_NAME} is off and SearXNG searches "
            f"{', '.join(others)} instead. These scrape result pages and get blocked after "
            "a few dozen queries; the Brave Search API is the reliable path"
        )
        return engine("warning", detail, NO_KEY_FIX)
    if ours.get("enabled") is False:
        fix = f"set disabled: false for {config.ENGINE_NAME} in SearXNG's settings.yml"
        return engine("fail", f"{config.ENGINE_NAME} is loaded but disabled", fix)
    return engine("ok", f"enabled; SearXNG's engines: {listed}")


async def json_check(http: httpx.AsyncClient, url: str) -> Check:
    def json_api(state: State, detail: str, fix: str = "") -> Check:
        return Check("searxng_json", "searxng", "SearXNG JSON API on", state, detail, fix)

    try:
        response = await http.get(f"{url}/search", params={"format": "json"})
    except httpx.HTTPError as exc:
        return json_api("fail", exc.__class__.__name__, SEARXNG_FIX)
    status = response.status_code
    if status in (200, 400) and isinstance(safe_json(response), dict):
        return json_api("ok", "SearXNG answers format=json")
    if status == 403:
        fix = "add json to search.formats in SearXNG's settings.yml"
        return json_api("fail", "SearXNG refused format=json (403)", fix)
    if status == 429:
        detail = "SearXNG rate-limited this service (429): its limiter is on"
        fix = "set server.limiter: false in SearXNG's settings.yml (an internal instance)"
        return json_api("fail", detail, fix)
    return json_api("fail", f"format=json answered HTTP {status}, not JSON", NOT_SEARXNG_FIX)


async def brave_key_check(
    url: str,
    free: list[Check] | None = None,
    plan: PlanReader | None = None,
    count: Counter | None = None,
    *,
    searcher: Searcher | None = None,
) -> Check:
    """One real search through our engine: spends one query of the user's Brave plan.

    `free` are this SearXNG's free checks when already run; a failed one means no search."""

    def key(state: State, detail: str, fix: str = "") -> Check:
        return Check("brave_key", "engine", "Brave API key accepted", state, detail, fix)

    free = free if free is not None else await searxng_free_checks(url)
    failed = first_failure(free)
    if failed is not None:
        return key("fail", f"not checked: {failed.name} failed ({failed.detail})", failed.fix)
    if any(c.id == "engine_loaded" and c.state == "warning" for c in free):
        return key("warning", "not checked: no key", NO_KEY_FIX)
    try:
        if searcher is not None:  # the service's: paced with its other searches, never cached
            response = await searcher.search("weather", engines=config.ENGINE_NAME, fresh=True)
        else:
            async with Searxng(url, timeout=SEARCH_TIMEOUT, plan=plan, count=count) as client:
                response = await client.search("weather", engines=config.ENGINE_NAME)
    except SearchError as exc:
        return key("fail", str(exc), "check again; if it fails again, read SearXNG's log")
    errors = "; ".join(response.engine_errors)
    if limited := [f for f in response.failures if f.code]:
        return key("fail", f"{limited[0].named} ({errors})", PLAN_FIX)
    if errors:
        return key(
            "fail", errors, KEY_FIX if REJECTED_KEY.search(errors) else engine_error_fix(url)
        )
    return key("ok", f"a search answered {len(response.results)} results")


async def searxng_checks(
    url: str, plan: PlanReader | None = None, count: Counter | None = None
) -> list[Check]:
    """Every SearXNG check, the Brave key's search included (the command line's), and one
    search of the key-free engines (no Brave query) to say which SearXNG suspended."""
    free = await searxng_free_checks(url)
    if first_failure(free) is not None:
        return free
    return [*free, await brave_key_check(url, free, plan, count), *await keyfree_checks(url)]


async def keyfree_checks(url: str) -> list[Check]:
    """The engines other than ours, searched once: each one blocked or suspended, until when."""
    async with Searxng(url, timeout=SEARCH_TIMEOUT) as client:
        try:
            others = sorted(await client.loaded_engines() - {config.ENGINE_NAME})
            response = await client.search("weather", engines=",".join(others)) if others else None
        except SearchError:
            return []
    if response is None:
        return []
    return suspension_checks(response.failures) or [
        Check("engines_answer", "engine", "key-free engines", "ok", f"{', '.join(others)} answer")
    ]


def plan_check(plan: Plan | None, spent: SearchesSpent, rate: float | None = None) -> Check:
    """The Brave plan as its last answer stated it, and the queries this service sent."""
    ours = f"this service sent {spent.today} today, {spent.month} this month"
    detail = f"{summary(plan, rate)}; {ours}"
    if plan is not None and (plan.low or plan.limited_now()):
        return Check("brave_plan", "engine", "Brave plan", "warning", detail, PLAN_FIX)
    return Check("brave_plan", "engine", "Brave plan", "ok", detail)


def suspension_checks(failures: list[EngineFailure]) -> list[Check]:
    """Each engine SearXNG suspended (Brave's rate or quota, a CAPTCHA, a block), and until
    when."""
    return [
        Check(
            f"suspended_{failure.engine}",
            "engine",
            f"engine {failure.engine}",
            "warning",
            failure.named,
            PLAN_FIX if failure.code else SUSPENDED_FIX,
        )
        for failure in failures
        if failure.suspended
    ]


# -- the model server --------------------------------------------------------------------------


async def model_reachable_check(client: ModelClient) -> tuple[Check, list[str] | None]:
    """GET /models, with each way it fails told apart; the listed ids when it answered."""
    name = "model server reachable"
    base = client.base_url

    def fail(detail: str, fix: str) -> tuple[Check, None]:
        return Check("model_reachable", "model", name, "fail", detail, fix), None

    try:
        async with asyncio.timeout(QUICK_TIMEOUT):
            response = await client.get("/models")
    except TimeoutError:
        return fail(f"{base}: no answer within {QUICK_TIMEOUT:g} s", MODEL_URL_FIX)
    except LLMError as error:
        return fail(error.message, MODEL_URL_FIX)
    if response.status_code in (401, 403):
        return fail(
            f"{base} refused the API key (HTTP {response.status_code})",
            "set LLM_API_KEY to a key this model server accepts",
        )
    if response.status_code == 404:
        return fail(f"{base}/models: not found (404)", MODEL_URL_FIX)
    body = safe_json(response)
    data = body.get("data") if isinstance(body, dict) else None
    if response.status_code != 200 or not isinstance(data, list):
        return fail(
            f"{base}/models answered HTTP {response.status_code}, not an OpenAI-style model list",
            MODEL_URL_FIX,
        )
    listed = [m["id"] for m in data if isinstance(m, dict) and m.get("id")]
    check = Check(
        "model_reachable",
        "model",
        name,
        "ok",
        f"{base}: {len(listed)} model{'' if len(listed) == 1 else 's'} listed",
    )
    return check, listed


def model_chosen_check(settings: config.Settings, listed: list[str]) -> Check:
    model = settings.default_model
    if not model:
        fix = "set DEFAULT_MODEL or MODELS"
        return Check("model_chosen", "model", "model chosen", "fail", "none", fix)
    known = {m.removesuffix(":latest") for m in listed}
    where = (
        "listed by the server"
        if model.removesuffix(":latest") in known
        else "not in the server's list (llama-server answers under any name; others refuse it)"
    )
    return Check("model_chosen", "model", "model chosen", "ok", f"{model}: {where}")


def window_check(
    window: int | None, settings: config.Settings, ollama: OllamaWindow | None = None
) -> Check:
    name = "served context window"
    if ollama is not None and ollama.runs_default:
        return ollama_default_window_check(ollama, settings.default_model)
    if window is None:
        detail = (
            "not reported by this server; the budget is CONTEXT_BUDGET_TOKENS "
            f"({settings.context_budget_tokens})"
        )
        return Check("model_window", "model", name, "ok", detail)
    if window < SMALL_WINDOW:
        detail = f"the server serves only {window} tokens: long conversations get compressed early"
        return Check("model_window", "model", name, "warning", detail, WINDOW_FIX)
    return Check("model_window", "model", name, "ok", f"{window} tokens; the budget stays below it")


def ollama_default_window_check(ollama: OllamaWindow, model: str) -> Check:
    """Ollama runs a model without num_ctx in a small default window and cuts a longer
    prompt from the start without an error: the persona, memory and tool note go first."""
    if ollama.loaded:
        served = f"is running {model} with a window of {ollama.loaded} tokens"
    else:
        served = (
            f"serves {model} with its default window: {ollama.default} tokens unless "
            "OLLAMA_CONTEXT_LENGTH is set on the Ollama server (the model is not loaded now, "
            "so it cannot say)"
        )
    trained = f"; the model was trained for {ollama.trained}" if ollama.trained else ""
    detail = (
        f"Ollama {served}{trained}. A longer conversation is cut from its start without an "
        "error; the chat compresses early to stay inside it"
    )
    return Check(
        "model_window",
        "model",
        "served context window",
        "warning",
        detail,
        OLLAMA_WINDOW_FIX.format(model=model),
    )


async def model_quick_checks(
    client: ModelClient,
    settings: config.Settings,
    read_window: Callable[[str], Awaitable[int | None]] | None = None,
) -> list[Check]:
    """Reachable, model chosen, served window (read by `read_window`, by default the
    client's served_window): nothing is generated."""
    reachable, listed = await model_reachable_check(client)
    if listed is None:
        return [reachable]
    chosen = model_chosen_check(settings, listed)
    if not chosen.ok:
        return [reachable, chosen]
    window = await (read_window or client.served_window)(settings.default_model)
    ollama = await client.ollama_window(settings.default_model, QUICK_TIMEOUT)
    return [reachable, chosen, window_check(window, settings, ollama)]


async def tool_check(client: ModelClient, model: str, *, timeout: float = TOOL_TIMEOUT) -> Check:
    """A tiny request with our search tool declared: the model answers 'OK' (8 tokens at most)."""
    name = f"tool calling accepted by {model}"
    payload = {
        "model": model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 8,
        "tools": [WEB_SEARCH.declaration],
    }
    try:
        async with asyncio.timeout(timeout):
            await client.complete(payload)
    except TimeoutError:
        return Check(
            "model_tools",
            "model",
            name,
            "warning",
            f"no answer within {timeout:g} s (the server may still be loading the model)",
            "wait a minute, then check again",
        )
    except LLMError as error:
        fix = {
            Failure.TOOLS_UNSUPPORTED: "pick a model with tool calling (the chat then answers "
            "without web tools)",
            Failure.AUTH: "set LLM_API_KEY to a key this model server accepts",
            Failure.NETWORK: MODEL_URL_FIX,
        }.get(error.kind, "see the message")
        return Check("model_tools", "model", name, "fail", error.message, fix)
    return Check("model_tools", "model", name, "ok", "a request with tools was answered")


def remembered_refusal_check(refusal: ToolRefusal | None, tools: Check) -> Check | None:
    """The chat withholds the tools from a model that once refused them: said when the
    model accepts them now, so the user knows to clear it (None otherwise)."""
    if refusal is None or tools.state != "ok":
        return None
    model = refusal["model"]
    return Check(
        "model_tool_refusal",
        "model",
        f"web tools offered to {model} in the chat",
        "warning",
        f"no: it refused them on {refusal['at'][:10]} ({refusal['reason']}), and accepts them now",
        f"click Try tools again next to the model picker (or DELETE "
        f"/api/models/tool-refusals/{model})",
    )


def stored_refusal(settings: config.Settings, model: str) -> ToolRefusal | None:
    """For the command line, which has no service: read from DATA_DIR, never created."""
    path = stored(settings.data_dir, settings.database_url)
    if path is None:
        return None
    database = Database(path)
    try:
        return database.tool_refusal(model)
    finally:
        database.close()


async def model_checks(settings: config.Settings) -> list[Check]:
    """Every model check, tool calling included (the command line's).

    An ok 'model chosen' is left out: the tool-calling line names the model."""
    client = ModelClient.from_settings(settings)
    try:
        checks = await model_quick_checks(client, settings)
        if first_failure(checks) is None:
            model = settings.default_model
            tools = await tool_check(client, model, timeout=60)
            refusal = await asyncio.to_thread(stored_refusal, settings, model)
            checks.append(tools)
            if remembered := remembered_refusal_check(refusal, tools):
                checks.append(remembered)
        return [c for c in checks if not (c.id == "model_chosen" and c.state == "ok")]
    finally:
        await client.aclose()


def token_check(settings: config.Settings) -> Check | None:
    """The token serve made at first start under Compose (AUTH_TOKEN empty), for the page's
    sign-in: only its owner can run this command where the data directory is."""
    path = settings.data_dir / TOKEN_FILE
    if settings.auth_token or not path.exists():
        return None
    token = path.read_text(encoding="utf-8").strip()
    detail = f"{token} (made at first start, kept in {path}; the page's sign-in asks for it)"
    return Check("access_token", "access", "access token", "ok", detail)
