"""The context window a server actually runs a model with, where the server says so, and
only from an answer that proves which server it is: a server that answers 200 to every
path (a proxy, a gateway, another kind of server) must not pass for one of these.

Each probe requires the fields its server sends in that answer, else it is "not this kind"
(None) and the next one asks:

- llama.cpp, ``GET /props``: a ``default_generation_settings`` object; the window is its
  ``n_ctx`` (or the top-level ``n_ctx`` of newer builds); whether its chat template takes
  tools, ``chat_template_caps.supports_tools``.
- Ollama, ``POST /api/show``: a ``modelfile`` string and a ``details`` object (api/types.go
  ShowResponse); ``PARAMETER num_ctx`` from ``parameters`` and the trained window from
  ``model_info["<arch>.context_length"]``. Then ``GET /api/ps``: a ``models`` list whose
  entry for the model has the ``context_length`` it is loaded with, and ``GET
  /api/version``: a ``version`` string.
- LM Studio, ``GET /api/v1/models``: a ``models`` list whose entry with ``key`` equal to the
  model has a ``loaded_instances`` list; a loaded instance's ``config.context_length``.
- vLLM, ``GET /v1/models``: the ``data`` entry with ``id`` equal to the model, ``object``
  "model" and an integer ``max_model_len`` (entrypoints/openai/protocol.py ModelCard).

Hosted APIs say nothing of it: the budget is then the configured one, and doctor warns
that the window is unknown. Whatever a probe fails with is in PROBE_FAILURES, caught by
the one caller that bounds them (ModelClient.probe).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import httpx

PROBE_FAILURES = (httpx.HTTPError, TimeoutError, ValueError, TypeError, AttributeError)
"""A probe's ways to fail: no answer, no answer in time, JSON missing or of another shape."""


def json_object(response: httpx.Response) -> dict[str, Any] | None:
    """A 200 answer's JSON object; None for any other answer."""
    if response.status_code != 200:
        return None
    try:
        data = response.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def tokens(value: object) -> int | None:
    """A window as a server states it: a positive integer, else nothing."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


@dataclass(frozen=True)
class LlamaCppProps:
    """What llama.cpp's /props says of the model it serves: its window, and whether its
    chat template takes tools (``chat_template_caps.supports_tools``; None in builds that
    do not say). A template without them renders no tool, so the model never calls one:
    llama.cpp accepts the `tools` field all the same."""

    window: int | None
    takes_tools: bool | None


async def read_llama_cpp(http: httpx.AsyncClient, root: str) -> LlamaCppProps | None:
    """llama.cpp's /props: the window (``n_ctx``), at the top or, in older builds, under its
    default generation settings, which every build sends; None when this is not llama.cpp."""
    props = json_object(await http.get(f"{root}/props"))
    if props is None or not isinstance(settings := props.get("default_generation_settings"), dict):
        return None
    caps = props.get("chat_template_caps")
    takes = caps.get("supports_tools") if isinstance(caps, dict) else None
    return LlamaCppProps(
        tokens(props.get("n_ctx")) or tokens(settings.get("n_ctx")),
        takes if isinstance(takes, bool) else None,
    )


async def read_ollama(http: httpx.AsyncClient, root: str, model: str) -> OllamaWindow | None:
    """What Ollama says of the model's window, or None when this is not Ollama.

    Ollama never takes a window size through /v1 (its docs: "The OpenAI API does not
    have a way of setting the context size"), so this is all the service can know."""
    shown = json_object(await http.post(f"{root}/api/show", json={"model": model}))
    if shown is None or not isinstance(shown.get("modelfile"), str):
        return None  # not Ollama: every version of it sends the Modelfile
    if not isinstance(shown.get("details"), dict):
        return None
    parameters = shown.get("parameters")
    match = re.search(r"num_ctx\s+(\d+)", parameters if isinstance(parameters, str) else "")
    version, running = await asyncio.gather(
        http.get(f"{root}/api/version"), http.get(f"{root}/api/ps")
    )
    stated = (json_object(version) or {}).get("version")
    return OllamaWindow(
        version=stated if isinstance(stated, str) else "",
        modelfile=int(match.group(1)) if match else None,
        loaded=loaded_window(json_object(running), model),
        trained=trained_window(shown.get("model_info")),
    )


def trained_window(info: object) -> int | None:
    """The window the model was trained for: model_info's ``<arch>.context_length``."""
    if not isinstance(info, dict):
        return None
    return next((tokens(v) for k, v in info.items() if str(k).endswith(".context_length")), None)


def loaded_window(running: dict[str, Any] | None, model: str) -> int | None:
    """The window /api/ps says the model is loaded with; None when it is not loaded."""
    listed = running.get("models") if running else None
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, dict):
            continue
        if same_ollama_model(str(entry.get("model") or entry.get("name") or ""), model):
            return tokens(entry.get("context_length"))
    return None


async def read_lmstudio(http: httpx.AsyncClient, root: str, model: str) -> int | None:
    """LM Studio's native API: a loaded instance's context_length (docs: developer/rest,
    "List your models"). Not loaded: LM Studio loads it on the first request with the
    length set in its app, so nothing is known yet."""
    listed = json_object(await http.get(f"{root}/api/v1/models"))
    entries = listed.get("models") if listed else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("key") != model:
            continue
        instances = entry.get("loaded_instances")
        for instance in instances if isinstance(instances, list) else []:
            config = instance.get("config") if isinstance(instance, dict) else None
            if isinstance(config, dict) and (length := tokens(config.get("context_length"))):
                return length
    return None


async def read_vllm(http: httpx.AsyncClient, base_url: str, model: str) -> int | None:
    """vLLM's ``max_model_len`` of the model, in its OpenAI model list: the longest
    prompt and reply together it takes."""
    listed = json_object(await http.get(f"{base_url}/models"))
    entries = listed.get("data") if listed else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model and entry.get("object") == "model":
            return tokens(entry.get("max_model_len"))
    return None


def same_ollama_model(listed: str, asked: str) -> bool:
    """Ollama names a model with or without its ":latest" tag."""
    return listed.removesuffix(":latest") == asked.removesuffix(":latest")


OLLAMA_DEFAULT_WINDOW = 4096
"""Ollama's window for a model without num_ctx, unless OLLAMA_CONTEXT_LENGTH says otherwise:
4096 since 0.6.7 (envconfig/config.go, commit 44b466e). Since 0.15.5 it depends on the GPU's
memory (4k below 24 GiB, then 32k, 256k; docs/context-length.mdx); 4096 is the least."""
OLLAMA_OLD_DEFAULT_WINDOW = 2048
"""The same before Ollama 0.6.7."""


@dataclass(frozen=True)
class OllamaWindow:
    """An Ollama model's windows: the one it is loaded with (``/api/ps`` context_length),
    the Modelfile's ``PARAMETER num_ctx`` (``/api/show`` parameters) and the one it was
    trained for (``/api/show`` model_info ``<arch>.context_length``), which Ollama does
    not use unless told to."""

    version: str
    modelfile: int | None
    loaded: int | None
    trained: int | None

    @property
    def default(self) -> int:
        """The window Ollama gives a model without num_ctx, as far as this server can say
        (OLLAMA_CONTEXT_LENGTH on the server raises it and is visible only once loaded)."""
        parts = tuple(int(p) for p in re.findall(r"\d+", self.version)[:3])
        old = len(parts) == 3 and parts < (0, 6, 7)
        return OLLAMA_OLD_DEFAULT_WINDOW if old else OLLAMA_DEFAULT_WINDOW

    @property
    def served(self) -> int:
        """What a prompt must fit: Ollama cuts a longer one silently, keeping its end."""
        return self.loaded or self.modelfile or self.default

    @property
    def assumed(self) -> bool:
        """The window is our guess of Ollama's default, not one Ollama reported: a model that
        is not loaded may still get a larger one from OLLAMA_CONTEXT_LENGTH."""
        return self.loaded is None and self.modelfile is None

    @property
    def runs_default(self) -> bool:
        """Served with Ollama's small default window: nobody set num_ctx or raised it."""
        return self.modelfile is None and self.served <= self.default
