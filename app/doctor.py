"""`python -m app doctor`: each part of the stack checked, with what to fix."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from app import config
from app.llm import LLMError, ModelClient
from app.search import SearchError, Searxng
from app.tools import SEARCH_DECLARATION


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


async def searxng_checks(url: str) -> list[Check]:
    checks = []
    async with httpx.AsyncClient(timeout=10) as http:
        try:
            health = await http.get(f"{url}/healthz")
            checks.append(Check("SearXNG reachable", health.status_code == 200, url))
        except httpx.HTTPError as exc:
            return [
                Check(
                    "SearXNG reachable",
                    False,
                    f"{url}: {exc.__class__.__name__}",
                    "start it (python -m app searxng, docker compose up) or fix SEARXNG_URL",
                )
            ]
        engines = {e["name"] for e in (await http.get(f"{url}/config")).json().get("engines", [])}
        checks.append(
            Check(
                f"engine {config.ENGINE_NAME} loaded",
                config.ENGINE_NAME in engines,
                ", ".join(sorted(engines)) or "no engine",
                "mount searxng-engines/brave_api.py in searx/engines/ and read SearXNG's log",
            )
        )
    if config.ENGINE_NAME not in engines:
        return checks
    # One query answers both: is JSON on, and does Brave accept the key (each query is
    # one request of the user's Brave plan).
    async with Searxng(url) as client:
        try:
            response = await client.search("weather", engines=config.ENGINE_NAME)
        except SearchError as exc:
            checks.append(
                Check("SearXNG JSON API on", False, str(exc), "add json to search.formats")
            )
            return checks
    checks.append(Check("SearXNG JSON API on", True, "search answered in JSON"))
    failed = "; ".join(response.engine_errors)
    checks.append(
        Check(
            "Brave API key accepted",
            not failed,
            failed or f"{len(response.results)} results",
            "set BRAVE_API_KEY (for SearXNG) to a valid Brave Search API key",
        )
    )
    return checks


async def model_checks(settings: config.Settings) -> list[Check]:
    model = settings.default_model
    client = ModelClient(settings.llm_base_url, settings.llm_api_key, timeout=60)
    try:
        listed = await client.models()
        reachable = listed is not None
        checks = [
            Check(
                "model server reachable",
                reachable,
                f"{settings.llm_base_url}: {len(listed or [])} models listed",
                "start the model server or fix LLM_BASE_URL (it ends with /v1)",
            )
        ]
        if not reachable:
            return checks
        if not model:
            return [*checks, Check("model chosen", False, "none", "set DEFAULT_MODEL or MODELS")]
        checks.append(await tool_check(client, model))
        window = await client.served_window(model)
        checks.append(
            Check(
                "served context window",
                True,
                f"{window} tokens; the budget stays below it"
                if window
                else "not reported by this server; the budget is CONTEXT_BUDGET_TOKENS",
            )
        )
        return checks
    finally:
        await client.aclose()


async def tool_check(client: ModelClient, model: str) -> Check:
    payload = {
        "model": model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 8,
        "tools": [SEARCH_DECLARATION],
    }
    try:
        await client.complete(payload)
    except LLMError as error:
        fix = (
            "pick a model with tool calling (the chat then answers without web tools)"
            if error.kind == "tools_unsupported"
            else "see the message"
        )
        return Check(f"tool calling accepted by {model}", False, error.message, fix)
    return Check(f"tool calling accepted by {model}", True, "a request with tools was answered")
