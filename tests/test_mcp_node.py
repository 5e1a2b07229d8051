"""The MCP server driven by Node.js clients from the npm registry, as a TypeScript MCP host
drives it: the TypeScript MCP SDK's Client over Streamable HTTP at /mcp and over stdio
(``python -m app mcp``), and the MCP Inspector's CLI listing the tools (tests/node)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, ChatService
from tests.node_clients import CLIENT, INSPECTOR

# The Node.js clients make their own connections, to the service's address.
pytestmark = pytest.mark.socket

TOOLS = {"web_search", "web_fetch", "measure_locale", "research"}


def run_node(nodejs: Path, *args: str) -> str:
    """What a Node.js program in tests/node printed, failing with what it wrote otherwise."""
    done = subprocess.run(args, cwd=nodejs, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args[:2]}: {done.stdout[-1000:]}{done.stderr[-2000:]}"
    return done.stdout


def sdk_client(nodejs: Path, server: dict[str, Any], query: str) -> dict[str, Any]:
    """The TypeScript SDK client's tool names and web_search result (tests/node/client.mjs)."""
    printed = run_node(nodejs, "node", str(CLIENT), json.dumps(server), query)
    return json.loads(printed)


def assert_real_results(answer: dict[str, Any], brave: Any, query: str) -> None:
    """The tools are all listed and the search reached the fake Brave through SearXNG."""
    assert set(answer["tools"]) == TOOLS
    search = answer["search"]
    assert not search.get("isError"), search
    assert brave.requests and brave.requests[-1].params["q"] == query
    hits = search["structuredContent"]["results"]
    assert hits and all(hit["url"].startswith("http") for hit in hits)
    assert search["content"][0]["text"].startswith(f"Results for '{query}':")


def test_the_typescript_sdk_lists_the_tools_and_searches_over_http(
    nodejs, chat: ChatService, brave
):
    answer = sdk_client(nodejs, {"url": f"{chat.url}/mcp"}, "pierogi")
    assert_real_results(answer, brave, "pierogi")


def test_the_typescript_sdk_lists_the_tools_and_searches_over_stdio(nodejs, searxng, pages, brave):
    server = {
        "command": sys.executable,
        "args": ["-m", "app", "mcp"],
        "cwd": str(ROOT),
        "env": {
            "SEARXNG_URL": searxng.url,
            "FETCH_ALLOW_HOSTS": pages.host,
            "SEARCH_LOCALE": "pl-PL",
            "PYTHONPATH": str(ROOT),
        },
    }
    answer = sdk_client(nodejs, server, "bigos")
    assert_real_results(answer, brave, "bigos")


def test_the_mcp_inspector_cli_lists_the_tools_over_http(nodejs, chat: ChatService):
    url = f"{chat.url}/mcp"
    printed = run_node(
        nodejs, str(INSPECTOR), "--cli", url, "--transport", "http", "--method", "tools/list"
    )
    listed = json.loads(printed)
    assert {tool["name"] for tool in listed["tools"]} == TOOLS
