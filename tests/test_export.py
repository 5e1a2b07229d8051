"""The Markdown export's parser and writer (markdown-it, mdformat: a tenth of a second of
imports) are loaded by the first export, not by every service at its start."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, chat_env
from tests.fakes.llm_server import FakeLLM, Reply
from tests.processes import seen_by

ANSWER = "Pierogi are filled dumplings."
EXPORTED = """
import asyncio, json, sys
import httpx
from app import config
from app.api.factory import create_app

def parser_loaded():
    return "markdown_it" in sys.modules

async def main():
    app = create_app(config.load(), "http://127.0.0.1:9")
    seen = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            made = (await c.post("/api/conversations", json={})).json()
            await c.post(f"/api/conversations/{made['id']}/chat", json={"message": "Pierogi?"})
            seen["before"] = parser_loaded()
            exported = await c.get(sys.argv[1].format(id=made["id"]))
            seen["export"] = exported.status_code, exported.text
            seen["after"] = parser_loaded()
    print(json.dumps(seen))

asyncio.run(main())
"""


@pytest.mark.parametrize("path", ["/api/conversations/{id}/export", "/api/export"])
def test_a_service_loads_the_markdown_parser_with_its_first_export(
    llm: FakeLLM, tmp_path: Path, path: str
) -> None:
    llm.script(Reply(text=ANSWER))
    env = {**chat_env(llm, tmp_path), "PYTHONPATH": str(ROOT)}
    seen = seen_by([sys.executable, "-c", EXPORTED, path], env, ROOT)
    assert seen["before"] is False
    status, text = seen["export"]
    assert status == 200
    assert ANSWER in text
    assert seen["after"] is True
