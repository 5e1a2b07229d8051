"""The model server checked: reachable, the chosen model listed, the window it is served
with (free), tool calling accepted (a tiny request), a refusal remembered."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from app import config
from app.chat.web_search import WEB_SEARCH
from app.doctor.check import QUICK_TIMEOUT, Check, first_failure
from app.model.client import KeyRefused, ModelClient, safe_json
from app.model.failures import Failure, LLMError
from app.model.windows import OllamaWindow
from app.store.database import Database, stored
from app.store.rows import ToolRefusal

TOOL_TIMEOUT = 20.0
"""Seconds for the tool-calling request: a local server may first load the model."""
SMALL_WINDOW = 8192
"""A served window below this many tokens gets a warning: conversations compress early."""
MODEL_URL_FIX = "start the model server or fix LLM_BASE_URL (it ends with /v1)"
WINDOW_FIX = (
    "raise it (Ollama: num_ctx / OLLAMA_CONTEXT_LENGTH; llama-server: --ctx-size), then check again"
)
UNKNOWN_WINDOW_FIX = (
    "set CONTEXT_BUDGET_TOKENS to at most the model's window (a hosted API's model page "
    "states it): the budget is then yours, and this warning goes"
)
OLLAMA_WINDOW_FIX = (
    "start Ollama with OLLAMA_CONTEXT_LENGTH=32768 (or more; its environment, e.g. "
    "`OLLAMA_CONTEXT_LENGTH=32768 ollama serve`, the systemd unit or the container), or make "
    "a model with a Modelfile of `FROM {model}` and `PARAMETER num_ctx 32768` (`ollama create "
    "{model}-32k -f Modelfile`) and use that; MODEL_PARAMS cannot set it (Ollama's /v1 API "
    "has no window size). Then check again"
)


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
    if window is None and settings.context_budget_stated:
        detail = (
            f"the server does not say it; CONTEXT_BUDGET_TOKENS ({settings.context_budget_tokens}) "
            "says how much fits"
        )
        return Check("model_window", "model", name, "ok", detail)
    if window is None:
        detail = (
            "unknown: the server says nothing of it in the shape of llama.cpp's /props, "
            "Ollama's /api/show, LM Studio's /api/v1/models or vLLM's max_model_len; the "
            f"budget is CONTEXT_BUDGET_TOKENS ({settings.context_budget_tokens}) and tool "
            "results are not fitted to the window"
        )
        return Check("model_window", "model", name, "warning", detail, UNKNOWN_WINDOW_FIX)
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
    if client.template_tools.get(model) is False:  # read with the window, before this
        return Check(
            "model_tools",
            "model",
            name,
            "warning",
            "accepted, but its chat template has no tool calling (llama.cpp's /props): "
            "the chat searches for it before it answers, instead of letting it search",
            "serve the model with a chat template that has tools (llama-server --jinja "
            "with the model's own template, or --chat-template-file)",
        )
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


def key_refused_check(refused: KeyRefused | None) -> Check | None:
    """An answer the model server refused for the key since the last one it gave: the
    free checks may all pass (a server that lists its models without a key) while the chat
    cannot answer, so Status says which setting the failure concerns (None otherwise)."""
    if refused is None:
        return None
    return Check(
        "model_key_refused",
        "model",
        "answers given with LLM_API_KEY",
        "fail",
        f"refused at {refused.at:%H:%M} UTC for {refused.model or 'the model'}: {refused.message}",
        "set LLM_API_KEY to a key this model server accepts, restart the service, then "
        "retry the answer",
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
