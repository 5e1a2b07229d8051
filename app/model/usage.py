"""Token counts as model servers report them, and the one shape they are read into."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict


class PromptDetails(TypedDict, total=False):
    cached_tokens: int | None


class RawUsage(TypedDict, total=False):
    """A ``usage`` object as servers send it: OpenAI's fields, LiteLLM's cache reads,
    Anthropic's input / output counts, OpenRouter's cost. JSON, so only as typed as the
    server keeps to it: normalize_usage reads each field defensively."""

    prompt_tokens: int | None
    completion_tokens: int | None
    prompt_tokens_details: PromptDetails | None
    cache_read_input_tokens: int | None
    cache_creation_input_tokens: int | None
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None


@dataclass
class Usage:
    """Token counts normalised across servers; cost only when the server reported one."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None


def normalize_usage(raw: RawUsage | None, floor_prompt_tokens: int = 0) -> Usage | None:
    """One shape for the ones seen in the wild.

    OpenAI-style (llama.cpp, vLLM, OpenRouter, LiteLLM): ``prompt_tokens`` counts the whole
    prompt, cached part included, which comes as ``prompt_tokens_details.cached_tokens`` or
    (LiteLLM) ``cache_read_input_tokens``. Some servers count only the uncached part in
    ``prompt_tokens``: when it is smaller than the cached count, the two are added.
    Anthropic-style (``input_tokens`` without ``prompt_tokens``): the prompt is
    ``input_tokens`` plus the cache reads and writes, which it leaves out (Anthropic's
    prompt caching docs, "Tracking cache performance"). The local estimate is a floor.
    """
    if not raw:
        return None
    details = raw.get("prompt_tokens_details") or {}
    cached = int(raw.get("cache_read_input_tokens") or details.get("cached_tokens") or 0)
    input_tokens = raw.get("input_tokens")
    if raw.get("prompt_tokens") is None and input_tokens is not None:
        written = int(raw.get("cache_creation_input_tokens") or 0)
        prompt = int(input_tokens) + cached + written
    else:
        prompt = int(raw.get("prompt_tokens") or 0)
        if prompt < cached:
            prompt += cached
    cost = raw.get("cost")
    return Usage(
        prompt_tokens=max(prompt, floor_prompt_tokens),
        completion_tokens=int(raw.get("completion_tokens") or raw.get("output_tokens") or 0),
        cached_tokens=cached,
        cost=float(cost) if isinstance(cost, int | float) else None,
    )
