"""A turn's storage cost, PostgreSQL against SQLite (issue 26), through the Storage facade
the service uses (app/store/storage.py), in this process, with no HTTP and no model: per
turn, begin_turn (the lease and the user's message, and the conversation read back), the
checkpoints of a streaming answer (put_message of the answer so far, CHECKPOINTS times,
as app/chat/outcome.py writes one every CHECKPOINT_SECONDS), and save_outcome (the answer,
the totals and the lease released, in one transaction), in a conversation of 10 and of
1,000 messages (filled first through the same calls; then, on PostgreSQL, VACUUM ANALYZE
and a CHECKPOINT, or the measured turns pay for the fill's aftermath). Each measured turn
is rewound after (untimed), so the size stays. Reports
ms per turn p50 / p95 for the whole turn and for each of its three parts.

PostgreSQL is a cluster of tests/postgres.py with fsync on (a commit waits for the disk,
as SQLite's outcome write, synchronous=FULL, does), on this machine over loopback TCP:
a database on another machine adds its round trips to each query.

Run: .venv/bin/python bench/storage_cost.py [--backends postgresql,sqlite] [--sizes 10,1000]
     [--turns 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.store.rows import Message, OutcomeWrite  # noqa: E402
from app.store.storage import Storage  # noqa: E402
from bench.common import machine_load, percentile  # noqa: E402
from bench.replicas import BACKENDS, database_server  # noqa: E402

MODEL = "fake-model"
QUESTION = "How long do pierogi with potato and cheese boil, and why does the filling matter? "
SENTENCE = "Sentence of a typical answer, about pierogi, their dough and their fillings. "
ANSWER_SENTENCES = 20  # about 1,500 characters
CHECKPOINTS = 4
PARTS = ("begin_turn", "checkpoints", "save_outcome")


@dataclass
class Size:
    backend: str
    messages: int
    parts: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PARTS})
    whole: list[float] = field(default_factory=list)


def answer(sentences: int, status: str) -> Message:
    return {"role": "assistant", "content": SENTENCE * sentences, "status": status}


def outcome(position: int) -> OutcomeWrite:
    return {
        "position": position,
        "answer": answer(ANSWER_SENTENCES, "complete"),
        "rewind": False,
        "summary": None,
        "summarized": None,
        "totals": {"prompt_tokens": 1200, "completion_tokens": 400, "searches": 0},
        "budget": None,
        "usage": None,
    }


async def turn(storage: Storage, conversation: str, text: str, times: dict[str, float]) -> None:
    """One turn's writes as app/chat makes them; the seconds of each part into `times`."""
    started = time.perf_counter()
    lease, start = await storage.begin_turn(conversation, text, MODEL)
    position = len(start.conversation["messages"])
    begun = time.perf_counter()
    for n in range(1, CHECKPOINTS + 1):
        partial = answer(ANSWER_SENTENCES * n // (CHECKPOINTS + 1), "interrupted")
        await storage.put_message(conversation, position, partial)
    checkpointed = time.perf_counter()
    await storage.save_outcome(conversation, outcome(position), lease.owner)
    lease.dropped()
    ended = time.perf_counter()
    times.update(
        begin_turn=begun - started,
        checkpoints=checkpointed - begun,
        save_outcome=ended - checkpointed,
    )


def settle(url: str | None) -> None:
    """After the fill, what a server does to rows written days apart before anyone reads
    them again: VACUUM ANALYZE and a CHECKPOINT (PostgreSQL; SQLite needs neither)."""
    if not url:
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("VACUUM ANALYZE")
        db.execute("CHECKPOINT")


async def measure(storage: Storage, size: Size, turns: int, url: str | None = None) -> None:
    created = await storage.create("pierogi", {})
    conversation = created["id"]
    times: dict[str, float] = {}
    for n in range(size.messages // 2):
        await turn(storage, conversation, f"{n}: {QUESTION * 3}", times)
    await asyncio.to_thread(settle, url)
    for n in range(turns):
        await turn(storage, conversation, f"measured {n}: {QUESTION * 3}", times)
        for part in PARTS:
            size.parts[part].append(times[part])
        size.whole.append(sum(times.values()))
        await storage.rewind(conversation)


def open_storage(root: Path, env: dict[str, str]) -> Storage:
    """As the service opens it: DATA_DIR, and DATABASE_URL for PostgreSQL."""
    root.mkdir(parents=True, exist_ok=True)
    storage = Storage(root, database_url=env.get("DATABASE_URL", ""))
    storage.open()
    return storage


def run(backend: str, messages: int, turns: int, scratch: Path, env: dict[str, str]) -> Size:
    size = Size(backend, messages)
    storage = open_storage(scratch / f"{backend}-{messages}", env)
    try:
        asyncio.run(measure(storage, size, turns, env.get("DATABASE_URL")))
    finally:
        storage.close()
    return size


def ms(values: list[float]) -> str:
    return f"{percentile(values, 0.5) * 1000:7.2f} {percentile(values, 0.95) * 1000:7.2f}"


def report(size: Size) -> None:
    parts = " ".join(ms(size.parts[part]) for part in PARTS)
    print(f"{size.backend:<10} {size.messages:>8} {ms(size.whole)} {parts}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--sizes", default="10,1000", help="conversation sizes in messages")
    parser.add_argument("--turns", type=int, default=100, help="measured turns per size")
    args = parser.parse_args()
    print(
        f"{machine_load()} at start; {CHECKPOINTS} checkpoints per turn, answers of "
        f"{len(SENTENCE) * ANSWER_SENTENCES:,} characters"
    )
    print(
        f"{'backend':<10} {'messages':>8} {'whole turn':>15} {'begin_turn':>15} "
        f"{'checkpoints':>15} {'save_outcome':>15}\n{'':<10} {'':>8}" + " p50 ms  p95 ms" * 4
    )
    with tempfile.TemporaryDirectory() as scratch:
        for backend in (b for b in args.backends.split(",") if b):
            with database_server(backend) as shared:
                for messages in (int(n) for n in args.sizes.split(",") if n):
                    env = shared.new_database(f"size-{messages}")
                    report(run(backend, messages, args.turns, Path(scratch), env))
                    shared.check_used()
    print(f"{machine_load()} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
