"""The Node.js MCP clients the tests drive: the TypeScript MCP SDK and the MCP Inspector,
pinned in tests/node/package-lock.json and installed from the npm registry with `npm ci`
the first time a test needs them (tests/node/node_modules, gitignored).

As with the SearXNG venvs (app/search/embedded.py), a stamp records the lock installed, so
a changed lock reinstalls, and test workers starting at once take turns on a lock file."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

NODE_DIR = Path(__file__).with_name("node")
CLIENT = NODE_DIR / "client.mjs"
INSPECTOR = NODE_DIR / "node_modules" / ".bin" / "mcp-inspector"


def installed() -> Path:
    """tests/node, its node_modules installed from the lock."""
    modules = NODE_DIR / "node_modules"
    stamp = modules / "installed-lock.json"
    wanted = (NODE_DIR / "package-lock.json").read_text()
    with open(NODE_DIR / "node_modules.lock", "w") as turn:
        fcntl.flock(turn, fcntl.LOCK_EX)
        if not (stamp.exists() and stamp.read_text() == wanted):
            command = ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"]
            done = subprocess.run(
                command, cwd=NODE_DIR, capture_output=True, text=True, timeout=600
            )
            assert done.returncode == 0, f"npm ci in {NODE_DIR}: {done.stderr[-2000:]}"
            stamp.write_text(wanted)
    return NODE_DIR
