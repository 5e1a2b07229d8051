"""The two servers: the chat service (`serve`) and the MCP server on stdio (`mcp`)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import importlib
import logging
import signal
import sys

from app import config
from app.cli.searching import searcher, searxng_url

# Modules that libraries import at their first use, imported at start instead: mid-stream,
# each import is 5-20 ms with the event loop held (httpx's own transport, the fetcher's; the
# asyncio backend of anyio, for the first storage call; the IDNA codec, for the first
# lookup of a name).
PRELOADED = ("httpcore", "anyio._backends._asyncio", "encodings.idna")


def compose_token(settings: config.Settings, host: str) -> str:
    """The token for a service that listens beyond loopback without AUTH_TOKEN: under
    Compose (PUBLISHED_ON_LOOPBACK), the one kept in DATA_DIR, made at first start and
    shown then; anywhere else, none: the user must choose."""
    from app.store.files import TOKEN_FILE, stored_token

    if not settings.published_on_loopback:
        raise config.ConfigError(
            f"refusing to serve on {host} without AUTH_TOKEN: anyone on that network "
            "could use your model and search; set AUTH_TOKEN or bind 127.0.0.1"
        )
    token, made = stored_token(settings.data_dir)
    path = settings.data_dir / TOKEN_FILE
    if not token:  # else the service would serve with no token at all
        raise config.ConfigError(f"{path} is empty: delete it, and the next start makes one")
    if made:
        print(
            f"No AUTH_TOKEN set: made an access token, kept in {path} (shown this once; "
            f"`python -m app doctor` shows it again). The page asks for it:\n  {token}",
            flush=True,
        )
    else:
        print(f"No AUTH_TOKEN set: the page and the API ask for the token in {path}", flush=True)
    return token


def cmd_serve(args: argparse.Namespace, settings: config.Settings) -> int:
    # Imported here: the web stack is only needed by serve, and every other command
    # starts faster without it.
    from app.api import serving
    from app.api.factory import create_app
    from app.pages import addresses

    if not config.is_loopback(args.host) and not settings.auth_token:
        settings = dataclasses.replace(settings, auth_token=compose_token(settings, args.host))
    for entry in sorted(settings.fetch_allow_hosts):
        if addresses.names_this_service(entry, args.port):
            raise config.ConfigError(
                f"FETCH_ALLOW_HOSTS names this service itself ({entry}): through web_fetch "
                "the model could read your conversations; remove it"
            )
    logging.basicConfig(level=settings.log_level, format="%(levelname)s %(name)s: %(message)s")
    # A line per request (to the model server and SearXNG, and uvicorn's own per request)
    # only when debugging: the turns have their own lines, and each line costs CPU.
    debug = settings.log_level == "DEBUG"
    if not debug:
        logging.getLogger("httpx").setLevel(logging.WARNING)
    # uvicorn re-raises the signal it stopped on; exiting cleanly lets the embedded
    # SearXNG be stopped and its files removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    from app.store.database import reach

    reach(settings.database_url)
    with searxng_url(settings, supervise=True) as url:
        print(f"SearXNG: {url}; model server: {settings.llm_base_url}", flush=True)
        app = create_app(settings, url)
        for module in PRELOADED:
            importlib.import_module(module)
        # What start-up built lives as long as the process: out of the collector's sight,
        # full collections stop walking it, which they would do mid-stream.
        gc.freeze()
        options = {"log_level": "info", "access_log": debug, "loop": "uvloop"}
        serving.run(serving.server_config(app, settings, args.host, args.port, **options))
    return 0


def cmd_mcp(args: argparse.Namespace, settings: config.Settings) -> int:
    """The MCP server on stdio, for Claude Desktop, LM Studio and editors. stdout is the
    protocol: the log goes to stderr, SearXNG's to its own file."""
    from app.mcp.server import serve_stdio

    logging.basicConfig(
        level=settings.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # A client stops its server with SIGTERM: exiting cleanly stops the embedded SearXNG.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with searxng_url(settings) as url:
        logging.getLogger(__package__).info("MCP server on stdio; SearXNG: %s", url)
        asyncio.run(serve_stdio(settings, searcher(url, settings)))
    return 0
