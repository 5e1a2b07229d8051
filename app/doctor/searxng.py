"""SearXNG and our engine checked: reachable, our engine loaded, JSON on (free), the
Brave key (one real search), the plan and the engines suspended."""

from __future__ import annotations

import asyncio
import re

import certifi
import httpx

from app import config
from app.doctor.check import QUICK_TIMEOUT, Check, State, describe, first_failure
from app.model.client import safe_json
from app.search import embedded
from app.search.client import BRAVE_ENGINES, Counter, SearchError, Searxng, engines_by_name
from app.search.failures import EngineFailure
from app.search.plan import Plan, PlanReader, cost, quota_worth, summary
from app.search.searcher import Searcher
from app.store.searches import SearchesSpent
from app.tls import tls_context

SEARCH_TIMEOUT = 15.0
"""Seconds for the Brave key's search: SearXNG waits for the engine, which waits for Brave."""
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


async def searxng_free_checks(url: str, *, timeout: float = QUICK_TIMEOUT) -> list[Check]:
    """SearXNG reachable, our engine loaded and enabled, JSON on: no search is run.

    JSON is checked with a ``format=json`` request without a query, which SearXNG answers
    before any engine runs: 400 with a JSON error ("No query") when JSON is on, 403 when
    json is missing from search.formats (searx/webapp.py, ``search()``).
    """
    url = url.rstrip("/")
    name = "SearXNG reachable"
    # The process's one TLS context: a client of its own would load the CA bundle again
    # (about 30 ms of CPU on the event loop, at each look of the Status panel).
    async with httpx.AsyncClient(timeout=timeout, verify=tls_context(certifi.where())) as http:
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


OURS = frozenset({config.ENGINE_SHORTCUT, config.OLD_ENGINE_SHORTCUT})
"""The shortcuts our module has set: what /config shows of an engine that is ours."""
UPSTREAM_FIX = (
    f"in searxng/settings.yml, list {config.ENGINE_NAME} (engine: brave_api) in keep_only and "
    f"take {config.OLD_ENGINE_NAME} out (or give it inactive: true), then render SearXNG's "
    "settings again and restart it"
)
RENAME_FIX = (
    f"in SearXNG's settings.yml, rename {config.OLD_ENGINE_NAME} to {config.ENGINE_NAME} "
    f"(keep_only and the engine's entry, shortcut {config.ENGINE_SHORTCUT}): the old name "
    "works for this release only"
)


async def engine_check(http: httpx.AsyncClient, url: str) -> Check:
    name = f"engine {config.ENGINE_NAME} loaded"

    def engine(state: State, detail: str, fix: str = "") -> Check:
        return Check("engine_loaded", "engine", name, state, detail, fix)

    try:
        response = await http.get(f"{url}/config")
        engines = engines_by_name(response.json())
    except httpx.HTTPError as exc:
        return engine("fail", f"/config: {exc.__class__.__name__}", SEARXNG_FIX)
    except (ValueError, KeyError, TypeError, AttributeError):
        detail = f"{url}/config did not answer SearXNG's JSON (HTTP {response.status_code})"
        return engine("fail", detail, NOT_SEARXNG_FIX)
    if (wrong := identity_problem(engines)) is not None:
        return engine("fail", *wrong)
    ours = engines.get(config.ENGINE_NAME) or engines.get(config.OLD_ENGINE_NAME)
    listed = ", ".join(sorted(engines)) or "no engine"
    if ours is None:
        fix = "mount searxng-engines/brave_api.py in searx/engines/ and read SearXNG's log"
        return engine("fail", f"SearXNG has: {listed}", fix)
    others = sorted(n for n, e in engines.items() if e is not ours and e.get("enabled"))
    if ours.get("enabled") is False and others:
        # What app/search/embedded.py renders when there is no Brave API key.
        detail = (
            f"no Brave API key: {config.ENGINE_NAME} is off and SearXNG searches "
            f"{', '.join(others)} instead. These scrape result pages and get blocked after "
            "a few dozen queries; the Brave Search API is the reliable path"
        )
        return engine("warning", detail, NO_KEY_FIX)
    if ours.get("enabled") is False:
        fix = f"set disabled: false for {ours['name']} in SearXNG's settings.yml"
        return engine("fail", f"{ours['name']} is loaded but disabled", fix)
    if ours["name"] == config.OLD_ENGINE_NAME:
        return engine("warning", f"ours, under its old name {config.OLD_ENGINE_NAME}", RENAME_FIX)
    if await asyncio.to_thread(embedded.names_old_engine):
        return engine("warning", embedded.OLD_NAME_WARNING, RENAME_FIX)
    return engine("ok", f"ours (shortcut {ours.get('shortcut')}); SearXNG's engines: {listed}")


def identity_problem(engines: dict[str, dict[str, object]]) -> tuple[str, str] | None:
    """What is wrong, and its fix, when /config shows an engine under our name that is not
    ours, or SearXNG's own braveapi active (no locale, no extra snippets, no dates, and a
    page 2 Brave refuses): told apart by the shortcut our module sets, without a search."""
    named = engines.get(config.ENGINE_NAME)
    if named is not None and named.get("shortcut") not in OURS:
        detail = (
            f"the engine named {config.ENGINE_NAME} is not ours: its shortcut is "
            f"{named.get('shortcut')!r}, ours says {config.ENGINE_SHORTCUT!r}"
        )
        fix = f"give {config.ENGINE_NAME} engine: brave_api in SearXNG's settings.yml"
        return detail, f"{fix}, and no shortcut of its own"
    upstream = engines.get(config.OLD_ENGINE_NAME)
    if upstream is None or upstream.get("shortcut") in OURS or upstream.get("enabled") is False:
        return None
    where = "beside ours" if named is not None else "instead of ours"
    detail = (
        f"SearXNG's own {config.OLD_ENGINE_NAME} engine is active {where}: it sends Brave no "
        "locale and asks for no extra snippets or dates, so its results lack what ours adds"
    )
    return detail, UPSTREAM_FIX


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
    if any(c.id == "engine_loaded" and c.fix == NO_KEY_FIX for c in free):
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
            others = sorted(await client.loaded_engines() - BRAVE_ENGINES)  # no Brave query
            response = await client.search("weather", engines=",".join(others)) if others else None
        except SearchError:
            return []
    if response is None:
        return []
    return suspension_checks(response.failures) or [
        Check("engines_answer", "engine", "key-free engines", "ok", f"{', '.join(others)} answer")
    ]


def plan_check(
    plan: Plan | None, spent: SearchesSpent, rate: float | None = None, price: float = 0.0
) -> Check:
    """The Brave plan as its last answer stated it, and the queries this service sent, with
    what they cost at ``price`` dollars per 1,000 (0: not said)."""
    ours = f"this service sent {spent.today} today, {spent.month} this month"
    if price:
        ours += f" (about {cost(spent.today, price)} today, {cost(spent.month, price)} this month)"
    detail = f"{summary(plan, rate)}{quota_worth(plan, price)}; {ours}"
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
