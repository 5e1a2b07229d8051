"""The chat service against a real llama-server (the tests' build and tiny Gemma 3 model),
in one run:
- time to first token and tokens per second, through the service vs direct to the server,
  the same prompt alternately (both hit the server's prompt cache alike);
- Stop: client abort until the server's /slots shows it idle, over 20 tries;
- the token estimate (app.chat.context.estimate_tokens) over the server's /tokenize count, per
  language sample in tests/llama/samples.

Run: .venv/bin/python bench/llama.py [TURNS]  (the first run builds llama-server: 5-10 min)
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import config  # noqa: E402
from app.chat import context  # noqa: E402
from tests.conftest import ChatService, chat_env  # noqa: E402
from tests.llama_server import MODEL_ALIAS, LlamaServer, ensure_built  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "llama" / "samples"
ANSWER_TOKENS = 64
STOPS = 20
QUESTION = "Tell me about home networks."
NO_SEARXNG = "http://127.0.0.1:9"  # tools are off: the service never asks it


def timed_stream(http: httpx.Client, url: str, body: dict, is_text) -> tuple[float, float, int]:
    """Seconds to the first text, seconds from the first to the last text, pieces of text."""
    started = time.perf_counter()
    first = last = None
    pieces = 0
    with http.stream("POST", url, json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and is_text(line[6:]):
                last = time.perf_counter()
                first = first or last
                pieces += 1
    if first is None or last is None:
        raise RuntimeError(f"no text streamed from {url}")
    return first - started, last - first, pieces


def direct_text(data: str) -> bool:
    if data.strip() == "[DONE]":
        return False
    choices = json.loads(data).get("choices") or [{}]
    return bool(choices[0].get("delta", {}).get("content"))


def service_text(data: str) -> bool:
    return json.loads(data)["type"] == "delta"


def direct_payload() -> dict:
    """What the service sends for QUESTION in a new conversation with tools off."""
    layers = context.Layers(
        persona=config.presets()["default"],
        memory="",
        summary="",
        today=context.today_line(date.today()),
        tool_note="",
    )
    return {
        "model": MODEL_ALIAS,
        "messages": context.assemble(layers, [{"role": "user", "content": QUESTION}]),
        "max_tokens": ANSWER_TOKENS,
        "ignore_eos": True,
        "stream": True,
    }


def new_conversation(http: httpx.Client, chat: ChatService) -> str:
    body = {"settings": {"web_search": False, "web_fetch": False}}
    return http.post(f"{chat.url}/api/conversations", json=body).json()["id"]


def speed(http: httpx.Client, chat: ChatService, server: LlamaServer, turns: int) -> None:
    results: dict[str, list[tuple[float, float, int]]] = {"service": [], "direct": []}
    for _ in range(turns):
        url = f"{chat.url}/api/conversations/{new_conversation(http, chat)}/chat"
        results["service"].append(timed_stream(http, url, {"message": QUESTION}, service_text))
        url = f"{server.api_base}/chat/completions"
        results["direct"].append(timed_stream(http, url, direct_payload(), direct_text))
    for path, runs in results.items():
        ttft = statistics.median(r[0] * 1000 for r in runs)
        rate = statistics.median((r[2] - 1) / r[1] for r in runs if r[1] > 0)
        print(f"{path:8s} time to first token median {ttft:6.1f} ms, {rate:6.1f} tokens/s")


def stop_to_idle(http: httpx.Client, chat: ChatService, server: LlamaServer) -> None:
    waits = []
    for _ in range(STOPS):
        url = f"{chat.url}/api/conversations/{new_conversation(http, chat)}/chat"
        with http.stream("POST", url, json={"message": QUESTION, "model": "endless"}) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and service_text(line[6:]):
                    break
            aborted = time.perf_counter()
        server.wait_idle(timeout=10)
        waits.append((time.perf_counter() - aborted) * 1000)
        time.sleep(0.2)  # let the service store the interrupted turn before the next one
    print(
        f"Stop: client abort to server idle (/slots), {STOPS} tries: "
        f"median {statistics.median(waits):.1f} ms, max {max(waits):.1f} ms"
    )


def estimates(server: LlamaServer) -> None:
    ratios = []
    for sample in sorted(SAMPLES.glob("*.txt")):
        text = sample.read_text()
        estimate, real = context.estimate_tokens(text), server.token_count(text)
        ratios.append(estimate / real)
        print(f"estimate/real {sample.stem:5s} {estimate:4d} / {real:4d} = {estimate / real:.2f}")
    print(f"estimate/real range {min(ratios):.2f} - {max(ratios):.2f}")


def main(turns: int) -> None:
    binary, model = ensure_built()
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "llama-server.log"
        with LlamaServer(binary, model, 8192, log) as server:
            env = chat_env(
                server,
                Path(scratch),
                MODELS=f"{MODEL_ALIAS},endless",
                DEFAULT_MODEL=MODEL_ALIAS,
                MAX_COMPLETION_TOKENS=str(ANSWER_TOKENS),
                MODEL_PARAMS=json.dumps(
                    {MODEL_ALIAS: {"ignore_eos": True}, "endless": {"ignore_eos": True}}
                ),
            )
            chat = ChatService(env, NO_SEARXNG).start()
            try:
                with httpx.Client(timeout=120) as http:
                    speed(http, chat, server, turns)
                    stop_to_idle(http, chat, server)
                estimates(server)
            finally:
                chat.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
