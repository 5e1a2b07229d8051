"""The context window a server actually runs a model with, where the server says so:
llama.cpp's ``/props``, Ollama's ``/api/show`` and ``/api/ps``, LM Studio's native model
list. vLLM and hosted APIs say nothing of it: the budget is then the configured one.

Each probe reads a server that may not be the kind it asks: an answer of another shape is
"not this kind" (None), and whatever it fails with is in PROBE_FAILURES, caught by the one
caller that bounds them (ModelClient.probe).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import httpx

PROBE_FAILURES = (httpx.HTTPError, TimeoutError, ValueError, TypeError, AttributeError)
"""A probe's ways to fail: no answer, no answer in time, JSON missing or of another shape."""


async def read_llama_cpp(http: httpx.AsyncClient, root: str) -> int | None:
    """llama.cpp's window (``n_ctx``), at the top of /props or, in older builds, under its
    default generation settings."""
    props = await http.get(f"{root}/props")
    if props.status_code != 200:
        return None
    data = props.json()
    n_ctx = data.get("n_ctx") or (data.get("default_generation_settings") or {}).get("n_ctx")
    return int(n_ctx) if n_ctx else None


async def read_ollama(http: httpx.AsyncClient, root: str, model: str) -> OllamaWindow | None:
    """What Ollama says of the model's window, or None when this is not Ollama.

    Ollama never takes a window size through /v1 (its docs: "The OpenAI API does not
    have a way of setting the context size"), so this is all the service can know."""
    show = await http.post(f"{root}/api/show", json={"model": model})
    if show.status_code != 200:
        return None
    shown = show.json()
    match = re.search(r"num_ctx\s+(\d+)", shown.get("parameters") or "")
    info = shown.get("model_info") or {}
    trained = next((v for k, v in info.items() if k.endswith(".context_length")), None)
    version, running = await asyncio.gather(
        http.get(f"{root}/api/version"), http.get(f"{root}/api/ps")
    )
    loaded = [
        m.get("context_length")
        for m in (running.json().get("models") if running.status_code == 200 else None) or []
        if same_ollama_model(m.get("model") or m.get("name") or "", model)
    ]
    return OllamaWindow(
        version=str(version.json().get("version", "")) if version.status_code == 200 else "",
        modelfile=int(match.group(1)) if match else None,
        loaded=int(loaded[0]) if loaded and loaded[0] else None,
        trained=int(trained) if isinstance(trained, int) else None,
    )


async def read_lmstudio(http: httpx.AsyncClient, root: str, model: str) -> int | None:
    """LM Studio's native API: a loaded instance's context_length (docs: developer/rest,
    "List your models"). Not loaded: LM Studio loads it on the first request with the
    length set in its app, so nothing is known yet."""
    listed = await http.get(f"{root}/api/v1/models")
    if listed.status_code != 200:
        return None
    for entry in listed.json().get("models") or []:
        if entry.get("key") == model:
            for instance in entry.get("loaded_instances") or []:
                length = (instance.get("config") or {}).get("context_length")
                if length:
                    return int(length)
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
