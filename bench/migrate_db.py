"""How long `python -m app migrate-db` takes for a household of a few hundred and of a few
thousand conversations (tests/household.py builds them through the store's own methods:
answers with sources and digests, versions, the search cache): SQLite to SQLite, SQLite to
PostgreSQL and back (a real PostgreSQL 15 in a temporary cluster, tests/postgres.py; skipped
with the reason when none can start). Each time covers the whole command's work: opening
both stores, the copy in one transaction and the row-by-row verification before it commits;
the second run against the same target (nothing to write, both read and compared) too.

Run: .venv/bin/python bench/migrate_db.py [--sizes 300,3000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.store.database import DATABASE, Database  # noqa: E402
from app.store.transfer import Location, Report, location, migrate  # noqa: E402
from tests.household import build  # noqa: E402
from tests.postgres import Postgres, start_postgres, unavailable  # noqa: E402


@contextmanager
def postgres() -> Iterator[Postgres | None]:
    reason = unavailable()
    if reason is not None:
        print(f"PostgreSQL skipped: {reason}")
        yield None
        return
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()
        server.remove()


def timed(source: Location, target: Location) -> tuple[float, Report]:
    started = time.perf_counter()
    report = migrate(source, target)
    return time.perf_counter() - started, report


def measure(size: int, scratch: Path, server: Postgres | None) -> None:
    home = scratch / f"home-{size}"
    home.mkdir()
    started = time.perf_counter()
    database = Database(home / DATABASE)
    build(database, size)
    database.close()
    built = time.perf_counter() - started
    source = location(str(home / DATABASE))
    stored = (home / DATABASE).stat().st_size / 1e6
    print(f"\n{size:,} conversations ({stored:.1f} MB of chat.db, built in {built:.1f} s)")
    routes = [("SQLite -> SQLite", source, location(str(scratch / f"copy-{size}.db")))]
    if server is not None:
        url = location(server.create(f"bench_{size}"))
        routes.append(("SQLite -> PostgreSQL", source, url))
        routes.append(("PostgreSQL -> SQLite", url, location(str(scratch / f"back-{size}.db"))))
    for name, origin, target in routes:
        copied, report = timed(origin, target)
        again, _ = timed(origin, target)
        print(f"| {name:<20} | copy {copied:6.2f} s | again (nothing to write) {again:6.2f} s |")
        print(f"  {report.lines()[1]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,3000", help="conversations per household")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="migrate-bench-") as scratch, postgres() as server:
        for size in (int(s) for s in args.sizes.split(",")):
            measure(size, Path(scratch), server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
