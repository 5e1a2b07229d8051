"""What other model servers send, replayed: one builder per server and shape.

Each builder returns a `Reply` whose ``wire`` builds, from the request, the exact events the
server would send, or a `Route` for one of its side APIs (``FakeLLM(routes=...)``). The
shapes come from the servers' sources and documentation, cited at each builder; where a
server differs by version, the builder takes the version's spelling as an argument.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from tests.fakes.llm_server import Reply, Route

CREATED = 1767225600  # 2026-01-01, one stamp for every chunk of a stream, as OpenAI does


def wants_usage(body: dict) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def arguments(value: dict | str) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def streamed(build: Callable[[dict], list[dict | str]]) -> Reply:
    """A Reply for streamed requests only (the builders here are for the chat turn)."""
    return Reply(wire=build)


# --------------------------------------------------------------------------------------------
# Ollama's OpenAI-compatible /v1 (ollama/ollama: openai/openai.go toChunk, FinishChunk,
# ToUsage, NewError; middleware/openai.go ChatWriter.writeResponse)


def ollama_chunk(model: str, delta: dict, finish: str | None = None) -> dict[str, Any]:
    """No "usage" key at all outside the usage chunk (*Usage, omitempty), unlike OpenAI."""
    return {
        "id": "chatcmpl-472",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_ollama",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def ollama_stream(
    model: str,
    text: list[str],
    *,
    reasoning: Sequence[str] = (),
    tool_calls: Sequence[tuple[str, dict]] = (),
    done_reason: str = "stop",
    prompt_tokens: int = 812,
    completion_tokens: int = 37,
) -> Reply:
    """Ollama's stream: role on the first chunk only; thinking as ``delta.reasoning`` with
    ``"content": ""`` kept; each tool call whole in one chunk (arguments complete, with
    ``index``); the native API's ``done_reason`` becomes ``finish_reason`` on a chunk with an
    empty delta ("stop" turns "tool_calls" when a call was sent); then, only when
    ``stream_options.include_usage`` was asked, a chunk with ``"choices": []`` and the usage
    (prompt_eval_count, eval_count); then [DONE]."""

    def build(body: dict) -> list[dict | str]:
        deltas: list[dict[str, Any]] = [{"content": "", "reasoning": r} for r in reasoning]
        deltas += [{"content": t} for t in text]
        deltas += [
            {
                "content": "",
                "tool_calls": [
                    {
                        "id": f"call_ol{index}",
                        "index": index,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments(args)},
                    }
                ],
            }
            for index, (name, args) in enumerate(tool_calls)
        ]
        if deltas:
            deltas[0] = {"role": "assistant", **deltas[0]}
        events: list[dict | str] = [ollama_chunk(model, d) for d in deltas]
        reason = "tool_calls" if tool_calls and done_reason == "stop" else done_reason
        finish = ollama_chunk(model, {}, reason)
        events.append(finish)
        if wants_usage(body):
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
            events.append({**finish, "choices": [], "usage": usage})
        return [*events, "[DONE]"]

    return streamed(build)


def ollama_error(status: int, message: str) -> Reply:
    """openai.NewError: the type follows the status, code and param are null."""
    kind = {400: "invalid_request_error", 404: "not_found_error"}.get(status, "api_error")
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Reply(status=status, error=body)


def ollama_tools_unsupported(model: str) -> Reply:
    """A model whose template has no tools: server/routes.go scheduleRunner wraps
    errCapabilityTools as "<model.Name> does not support tools", model.Name being the full
    registry name; handleScheduleError answers 400."""
    name = model if ":" in model else f"{model}:latest"
    return ollama_error(400, f"registry.ollama.ai/library/{name} does not support tools")


def ollama_routes(
    model: str,
    *,
    version: str = "0.12.6",
    num_ctx: int | None = None,
    loaded: int | None = None,
    trained: int = 40960,
) -> dict[tuple[str, str], Route]:
    """Ollama's native API beside /v1 (api/types.go ShowResponse, ProcessModelResponse):
    /api/show lists ``num_ctx`` in ``parameters`` only when the Modelfile sets it, and the
    trained window under ``model_info["<arch>.context_length"]``; /api/ps lists loaded models
    with the ``context_length`` they run with (OLLAMA_CONTEXT_LENGTH or the default)."""
    tag = model if ":" in model else f"{model}:latest"
    parameters = [("stop", '"<|im_end|>"'), ("temperature", "0.6")]
    if num_ctx is not None:
        parameters.insert(0, ("num_ctx", str(num_ctx)))

    def show(raw: bytes) -> tuple[int, dict[str, Any]]:
        asked = str(json.loads(raw or b"{}").get("model", ""))
        if asked.removesuffix(":latest") != tag.removesuffix(":latest"):
            return 404, {"error": f"model '{asked}' not found"}
        return 200, {
            "license": "Apache License 2.0",
            "modelfile": f"FROM {tag}\n",
            "parameters": "\n".join(f"{key:<30} {value}" for key, value in parameters),
            "template": "{{- range .Messages }}{{ .Content }}{{ end }}",
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": "qwen3",
                "families": ["qwen3"],
                "parameter_size": "8.2B",
                "quantization_level": "Q4_K_M",
            },
            "model_info": {
                "general.architecture": "qwen3",
                "general.parameter_count": 8190735360,
                "qwen3.context_length": trained,
                "qwen3.embedding_length": 4096,
            },
            "capabilities": ["completion", "tools", "thinking"],
            "modified_at": "2026-01-01T00:00:00Z",
        }

    def ps(_: bytes) -> tuple[int, dict[str, Any]]:
        if loaded is None:
            return 200, {"models": []}
        entry = {
            "name": tag,
            "model": tag,
            "size": 6_300_000_000,
            "digest": "500a1f067a9f782620b40bee6f7b0c89e17ae61f686b92c24933e4ca4b2b8b41",
            "details": {"format": "gguf", "family": "qwen3", "parameter_size": "8.2B"},
            "expires_at": "2026-01-01T00:05:00Z",
            "size_vram": 6_300_000_000,
            "context_length": loaded,
        }
        return 200, {"models": [entry]}

    return {
        ("GET", "/api/version"): lambda _: (200, {"version": version}),
        ("POST", "/api/show"): show,
        ("GET", "/api/ps"): ps,
    }


# --------------------------------------------------------------------------------------------
# vLLM (vllm-project/vllm: entrypoints/openai/chat_completion/serving.py
# chat_completion_stream_generator, engine/protocol.py DeltaMessage, UsageInfo, ErrorResponse)


def vllm_models(model: str, max_model_len: int) -> dict[tuple[str, str], Route]:
    """GET /v1/models as vLLM lists its model (entrypoints/openai/protocol.py ModelCard):
    ``max_model_len`` is the window it serves, prompt and reply together."""
    card = {
        "id": model,
        "object": "model",
        "created": 1767225600,
        "owned_by": "vllm",
        "root": f"/models/{model}",
        "parent": None,
        "max_model_len": max_model_len,
        "permission": [
            {
                "id": "modelperm-0b6c1d2e3f4a5b6c",
                "object": "model_permission",
                "created": 1767225600,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
    return {("GET", "/v1/models"): lambda _: (200, {"object": "list", "data": [card]})}


def vllm_chunk(model: str, choices: list[dict], usage: dict | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-9f6b2c1e4d8a4f0b",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def vllm_stream(
    model: str,
    text: list[str],
    *,
    reasoning: Sequence[str] = (),
    reasoning_field: str = "reasoning",
    tool_calls: Sequence[tuple[str, list[str]]] = (),
    prompt_tokens: int = 1500,
    cached_tokens: int | None = None,
    continuous: bool = False,
) -> Reply:
    """vLLM's stream: a first chunk with role and empty content; reasoning as
    ``delta.reasoning`` (``reasoning_content`` before it was renamed); a tool call's id, type
    and name first, then its arguments in the fragments given; finish_reason on the last
    choice chunk. Usage: a final ``"choices": []`` chunk when include_usage was asked, with
    ``prompt_tokens_details.cached_tokens`` when the server runs with
    --enable-prompt-tokens-details; with ``continuous`` (continuous_usage_stats, or a gateway
    forcing it) every chunk also carries the running totals so far."""

    def build(body: dict) -> list[dict | str]:
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{reasoning_field: r} for r in reasoning]
        deltas += [{"content": t} for t in text]
        for index, (name, fragments) in enumerate(tool_calls):
            head = {"id": f"chatcmpl-tool-{index}a7", "type": "function", "index": index}
            deltas.append({"tool_calls": [{**head, "function": {"name": name}}]})
            deltas += [
                {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                for piece in fragments
            ]
        finish = "tool_calls" if tool_calls else "stop"
        events: list[dict | str] = []
        for n, delta in enumerate(deltas, start=1):
            last = n == len(deltas)
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
            if last:
                choice = {**choice, "finish_reason": finish, "stop_reason": None}
            running = usage(n - 1) if continuous and wants_usage(body) else None
            events.append(vllm_chunk(model, [choice], running))
        if wants_usage(body):
            events.append(vllm_chunk(model, [], usage(len(deltas) - 1)))
        return [*events, "[DONE]"]

    def usage(completion_tokens: int) -> dict[str, Any]:
        counted: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
        }
        if cached_tokens is not None:
            counted["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
        return counted

    return streamed(build)


def vllm_error(status: int, message: str, type_: str = "BadRequestError") -> dict[str, Any]:
    """ErrorResponse(error=ErrorInfo(message, type, param, code)): code is the status."""
    return {"error": {"message": message, "type": type_, "param": None, "code": status}}


def vllm_old_stream_error(message: str) -> dict[str, Any]:
    """vLLM before ErrorInfo: ErrorResponse had object "error" and the fields at the top,
    and create_streaming_error_response sent it as is, mid-stream, with no "error" key."""
    return {
        "object": "error",
        "message": message,
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


def vllm_stream_failing(model: str, text: list[str], error: dict[str, Any]) -> Reply:
    """Some text, then an error event in the stream (the generator's except branch), then
    [DONE], as chat_completion_stream_generator ends after an exception."""

    def build(body: dict) -> list[dict | str]:
        first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        events: list[dict | str] = [vllm_chunk(model, [first])]
        events += [
            vllm_chunk(model, [{"index": 0, "delta": {"content": t}, "finish_reason": None}])
            for t in text
        ]
        return [*events, error, "[DONE]"]

    return streamed(build)


def vllm_tools_unsupported() -> Reply:
    """vLLM started without --enable-auto-tool-choice answers any request with tools (and
    the default tool_choice "auto") with this 400."""
    message = (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    )
    return Reply(status=400, error=vllm_error(400, message))


# --------------------------------------------------------------------------------------------
# llama.cpp's llama-server (the build tests/test_llama_server.py runs, from the llama.cpp
# sources of llama-cpp-python 0.3.36: its stream recorded with tools declared, greedy)

LLAMACPP_UNPARSED = "The model produced output that does not match the expected peg-native format"


def llamacpp_stream_unparsed(model: str, text: list[str], *, delay: float = 0.0) -> Reply:
    """Tools declared and the output not a call it can parse: llama-server streams the text
    as content (a first chunk with ``content: null``), then one error event (code 500,
    type server_error) and ends the stream: no finish_reason, no usage, no [DONE]."""

    def build(body: dict) -> list[dict | str]:
        def chunk(delta: dict) -> dict[str, Any]:
            return {
                "choices": [{"finish_reason": None, "index": 0, "delta": delta}],
                "created": CREATED,
                "id": "chatcmpl-4k4no138STeCJrzclqplM3kiPFGdK1mt",
                "model": model,
                "system_fingerprint": "b1-0c1e570",
                "object": "chat.completion.chunk",
            }

        events: list[dict | str] = [chunk({"role": "assistant", "content": None})]
        events += [chunk({"content": t}) for t in text]
        error = {"code": 500, "message": LLAMACPP_UNPARSED, "type": "server_error"}
        return [*events, {"error": error}]

    return Reply(wire=build, chunk_delay=delay)


# --------------------------------------------------------------------------------------------
# LM Studio (lmstudio-ai/docs: 1_developer/3_openai-compat/chat-completions.md lists the
# payload parameters it takes, stream_options not among them; 1_developer/2_rest/list.md)


def lmstudio_stream(model: str, text: list[str], reasoning: Sequence[str] = ()) -> Reply:
    """An LM Studio stream: reasoning as ``delta.reasoning_content`` (its "separate
    reasoning_content" setting), and no usage whatever stream_options says: a server that
    ignores stream_options."""

    def build(body: dict) -> list[dict | str]:
        def chunk(delta: dict, finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {
                "id": "chatcmpl-lmsx2k9v4q7dwb1f0c3e8",
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "system_fingerprint": model,
                "choices": [choice],
            }

        deltas = [{"role": "assistant", "reasoning_content": r} for r in reasoning]
        deltas += [{"role": "assistant", "content": t} for t in text]
        return [*(chunk(d) for d in deltas), chunk({}, "stop"), "[DONE]"]

    return streamed(build)


def lmstudio_context_overflow(kept: int = 6547, window: int = 4096) -> Reply:
    """LM Studio's refusal of a prompt longer than the loaded context (its bug tracker,
    lmstudio-bug-tracker#237, #546): a 400 whose "error" is the bare message."""
    message = (
        f"Trying to keep the first {kept} tokens when context the overflows. However, the "
        f"model is loaded with context length of only {window} tokens, which is not enough. "
        "Try to load the model with a larger context length, or provide a shorter input"
    )
    return Reply(status=400, error={"error": message})


def lmstudio_routes(model: str, loaded: int | None) -> dict[tuple[str, str], Route]:
    """GET /api/v1/models: each model with ``loaded_instances[].config.context_length``."""
    instances = [{"id": model, "config": {"context_length": loaded}}] if loaded else []
    entry = {
        "type": "llm",
        "publisher": "lmstudio-community",
        "key": model,
        "display_name": model,
        "architecture": "gemma3",
        "quantization": {"name": "Q4_0", "bits_per_weight": 4},
        "size_bytes": 241410208,
        "params_string": "270M",
        "loaded_instances": instances,
        "max_context_length": 32768,
        "format": "gguf",
        "capabilities": {"vision": False, "trained_for_tool_use": True},
        "description": None,
    }
    return {("GET", "/api/v1/models"): lambda _: (200, {"models": [entry]})}


# --------------------------------------------------------------------------------------------
# Hosted gateways


def openrouter_stream(
    model: str,
    text: list[str],
    *,
    reasoning: Sequence[str] = (),
    usage: dict[str, Any],
) -> Reply:
    """OpenRouter (openrouter.ai/docs/api-reference/streaming and
    /docs/use-cases/usage-accounting): ": OPENROUTER PROCESSING" comment lines while it
    waits; ``provider`` on each chunk; reasoning as ``delta.reasoning``; usage (with
    ``cost`` in credits and ``prompt_tokens_details.cached_tokens``) always in the last
    event, whether or not stream_options asked for it."""

    def build(body: dict) -> list[dict | str]:
        def chunk(delta: dict, finish: str | None = None) -> dict[str, Any]:
            choice = {
                "index": 0,
                "delta": delta,
                "finish_reason": finish,
                "native_finish_reason": finish,
                "logprobs": None,
            }
            return {
                "id": "gen-1767225600-Xk2mQ9pLr7Tz",
                "provider": "DeepInfra",
                "model": model,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "choices": [choice],
            }

        deltas = [{"role": "assistant", "content": "", "reasoning": r} for r in reasoning]
        deltas += [{"role": "assistant", "content": t} for t in text]
        events: list[dict | str] = [": OPENROUTER PROCESSING", ": OPENROUTER PROCESSING"]
        events += [chunk(d) for d in deltas]
        events.append(chunk({"role": "assistant", "content": ""}, "stop"))
        events.append({**chunk({"role": "assistant", "content": ""}), "usage": usage})
        return [*events, "[DONE]"]

    return streamed(build)


def openrouter_stream_failing(model: str, text: list[str], message: str | None) -> Reply:
    """An error after the answer started (openrouter.ai/docs/api-reference/streaming,
    "Handling Errors During Streaming"): HTTP 200 already sent, so a chunk with a top-level
    ``error`` and ``finish_reason: "error"``, then the stream ends. ``message`` None: the
    finish reason alone, as a provider's own "error" finish is passed through."""

    def build(body: dict) -> list[dict | str]:
        def chunk(delta: dict, finish: str | None = None) -> dict[str, Any]:
            return {
                "id": "gen-1767225600-Yq3nR8",
                "provider": "Chutes",
                "model": model,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        events: list[dict | str] = [chunk({"role": "assistant", "content": t}) for t in text]
        failed = chunk({"content": ""}, "error")
        if message is not None:
            failed["error"] = {"code": "server_error", "message": message}
        events.append(failed)
        return [*events, "[DONE]"]

    return streamed(build)


def openai_style_stream(model: str, text: list[str], usage: dict[str, Any]) -> Reply:
    """An OpenAI-shaped stream whose final usage chunk carries the given usage: for the
    gateways that pass another provider's usage fields through (LiteLLM's proxy adds
    Anthropic's ``cache_read_input_tokens`` / ``cache_creation_input_tokens``; a thin proxy
    in front of Anthropic's Messages API keeps its ``input_tokens``/``output_tokens``)."""

    def build(body: dict) -> list[dict | str]:
        def chunk(delta: dict, finish: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-gw41",
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        events: list[dict | str] = [chunk({"role": "assistant", "content": t}) for t in text]
        events.append(chunk({}, "stop"))
        events.append({**chunk({}), "choices": [], "usage": usage})
        return [*events, "[DONE]"]

    return streamed(build)


# --------------------------------------------------------------------------------------------
# A model that writes its tool call as text


def text_tool_call(model: str, written: str, pieces: int = 5) -> Reply:
    """A model that answers a tools request with the call written in its content, as Llama
    3.x ({"name": ..., "parameters": ...}), Hermes/Qwen (<tool_call>...</tool_call>) and
    Mistral ([TOOL_CALLS][...]) templates make it do when the server has no parser for it
    (vLLM without --tool-call-parser; Ollama with a template that does not parse it).
    Streamed in ``pieces`` Ollama-style chunks."""
    size = max(1, len(written) // pieces)
    parts = [written[i : i + size] for i in range(0, len(written), size)]
    return ollama_stream(model, parts)
