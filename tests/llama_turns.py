"""A chat service on a real llama-server (tests/llama_server.py), configured so that its
answers are short and the same every run, and the English sample the tests send it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import chat_env
from tests.llama_server import MODEL_ALIAS, LlamaServer

SAMPLES = Path(__file__).parent / "llama" / "samples"
ENDLESS = "gemma3-endless"
"""The same model under a second name whose requests ignore end-of-text: an answer long
enough to stop in the middle (llama-server answers under any name)."""
QUIET = {"web_search": False, "web_fetch": False}
ENGLISH = (SAMPLES / "en.txt").read_text()


def service_env(server: LlamaServer, tmp_path: Path, **extra: str) -> dict[str, str]:
    return chat_env(
        server,
        tmp_path,
        MODELS=f"{MODEL_ALIAS},{ENDLESS}",
        DEFAULT_MODEL=MODEL_ALIAS,
        SUMMARY_MODEL=MODEL_ALIAS,
        MAX_COMPLETION_TOKENS="24",
        COMPRESS_MAX_TOKENS="100",
        # Greedy sampling: the same garbage every run, so a failure can be replayed.
        MODEL_PARAMS=json.dumps(
            {
                MODEL_ALIAS: {"temperature": 0},
                ENDLESS: {"temperature": 0, "ignore_eos": True},
            }
        ),
        **extra,
    )
