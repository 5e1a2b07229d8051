"""The stored conversations without the service: exported, or moved to another database."""

from __future__ import annotations

import argparse
import json
import sys

from app import config
from app.cli.exits import EXIT_ERROR, EXIT_REFUSED


def cmd_export(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.store.database import DATABASE, Database, stored
    from app.store.errors import Damaged, InvalidId, NotFound
    from app.store.export import markdown_all

    path = stored(settings.data_dir, settings.database_url)
    if path is None:
        missing = settings.data_dir / DATABASE
        print(
            f"error: no conversations here: {missing} does not exist (DATA_DIR?)", file=sys.stderr
        )
        return EXIT_ERROR
    database = Database(path)
    wanted = database.ids() if args.all else [args.id]
    exported, status = [], 0
    for conversation_id in wanted:
        try:
            exported.append(database.load(conversation_id))
        except (NotFound, InvalidId, Damaged) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = EXIT_ERROR
    database.close()
    if not exported and not args.all:
        return status
    if args.json:
        print(json.dumps(exported if args.all else exported[0], ensure_ascii=False, indent=1))
    else:
        print(markdown_all(exported), end="")
    return status


def cmd_migrate_db(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.store import transfer
    from app.store.database import DATABASE

    try:
        configured = settings.database_url or str(settings.data_dir / DATABASE)
        password = settings.database_password  # PGPASSWORD_FILE's, for a URL given here
        source = transfer.location(config.with_password(args.source or configured, password))
        target = transfer.location(config.with_password(args.to, password))
        report = transfer.migrate(source, target, replace=args.replace)
    except transfer.TransferRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except transfer.TransferFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print("\n".join(report.lines()))
    return 0
