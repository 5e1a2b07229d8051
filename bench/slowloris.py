"""Slowloris against `python -m app serve`: many sockets that start a request without a
token and never finish its headers (a header line every few seconds, reopened whenever the
service closes one), while the owner asks, with the token, on a new connection every
`--every` seconds. Reports the owner's latency (p50, p95, max), the owner's failures, and
how many of the attacker's sockets the service closed.

Run: .venv/bin/python bench/slowloris.py [--sockets 1100] [--seconds 40] [--app-root DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import resource
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    app_root_argument,
    code_version,
    machine_load,
    percentile,
    service,
)
from tests.conftest import chat_env  # noqa: E402
from tests.fakes.llm_server import FakeLLM  # noqa: E402

START = b"GET /api/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
DRIP_SECONDS = 5.0
"""A header line this often: under any idle timeout that only counts silence."""


@dataclass
class Tally:
    owner: list[float] = field(default_factory=list)
    owner_failed: list[str] = field(default_factory=list)
    attacker_closed: int = 0
    attacker_refused: int = 0


async def half_open(port: int, tally: Tally, until: float) -> None:
    """One attacker's socket, reopened as soon as the service closes it."""
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            tally.attacker_refused += 1
            await asyncio.sleep(0.5)
            continue
        try:
            writer.write(START)
            while time.monotonic() < until:
                await writer.drain()
                try:  # the service closing the socket ends the read at once
                    if not await asyncio.wait_for(reader.read(1024), DRIP_SECONDS):
                        tally.attacker_closed += 1
                        break
                except TimeoutError:
                    writer.write(f"X-{secrets.token_hex(2)}: 1\r\n".encode())
        except OSError:
            tally.attacker_closed += 1
        finally:
            writer.close()


async def owner(url: str, token: str, tally: Tally, until: float, every: float) -> None:
    headers = {"Authorization": f"Bearer {token}", "Connection": "close"}
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                answer = await http.get(f"{url}/api/conversations", headers=headers)
            if answer.status_code == 200:
                tally.owner.append(time.perf_counter() - started)
            else:
                tally.owner_failed.append(str(answer.status_code))
        except httpx.HTTPError as exc:
            tally.owner_failed.append(type(exc).__name__)
        await asyncio.sleep(every)


async def attackers(port: int, sockets: int, seconds: float, closed: Any) -> None:
    tally = Tally()
    until = time.monotonic() + seconds
    await asyncio.gather(*(half_open(port, tally, until) for _ in range(sockets)))
    closed.value = tally.attacker_closed
    closed.refused = tally.attacker_refused


def attack(port: int, sockets: int, seconds: float, closed: Any) -> None:
    """The attacker, in a process of its own: the owner's figures are the service's, not
    the wait of a client that shares a loop with 1,100 sockets."""
    asyncio.run(attackers(port, sockets, seconds, closed))


def besiege(url: str, token: str, args: argparse.Namespace) -> Tally:
    tally = Tally()
    port = int(url.rsplit(":", 1)[1])
    with multiprocessing.Manager() as manager:
        closed = manager.Namespace(value=0, refused=0)
        attacker = multiprocessing.Process(
            target=attack, args=(port, args.sockets, args.seconds, closed)
        )
        attacker.start()
        time.sleep(args.head_start)  # the sockets open before the owner asks
        until = time.monotonic() + args.seconds - args.head_start
        asyncio.run(owner(url, token, tally, until, args.every))
        attacker.join()
        tally.attacker_closed, tally.attacker_refused = closed.value, closed.refused
    return tally


def report(tally: Tally, sockets: int, seconds: float) -> None:
    ms = [t * 1000 for t in tally.owner]
    print(f"{sockets} half-open sockets for {seconds:g} s; {machine_load()}")
    if ms:
        print(
            f"owner's requests answered: {len(ms)}; p50 {percentile(ms, 0.5):.0f} ms, "
            f"p95 {percentile(ms, 0.95):.0f} ms, max {max(ms):.0f} ms"
        )
    print(f"owner's requests failed: {len(tally.owner_failed)} {sorted(set(tally.owner_failed))}")
    print(
        f"attacker's sockets closed by the service: {tally.attacker_closed}; "
        f"connections refused: {tally.attacker_refused}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=1100)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--every", type=float, default=0.5, help="seconds between owner's asks")
    parser.add_argument("--head-start", type=float, default=5.0, help="seconds before the owner")
    parser.add_argument(
        "--nofile",
        default=f"1024:{resource.getrlimit(resource.RLIMIT_NOFILE)[1]}",
        help="the service's open-file limit, soft:hard (default: 1,024, as systemd gives a "
        "service, and this shell's hard limit)",
    )
    app_root_argument(parser)
    args = parser.parse_args()
    token = secrets.token_hex(32)
    print(code_version(args.app_root))
    with FakeLLM(models=["fake-model"]) as llm, tempfile.TemporaryDirectory() as scratch:
        # No search is made: a SearXNG that is not there keeps the bench to the service.
        env = {
            **chat_env(llm, Path(scratch)),
            "AUTH_TOKEN": token,
            "SEARXNG_URL": "http://127.0.0.1:9",
        }
        limited = ["prlimit", f"--nofile={args.nofile}", sys.executable]
        with service(env, args.app_root, wrapper=limited) as chat:
            tally = besiege(chat.url, token, args)
    print(f"the service's open-file limit: {args.nofile}")
    report(tally, args.sockets, args.seconds)


if __name__ == "__main__":
    main()
