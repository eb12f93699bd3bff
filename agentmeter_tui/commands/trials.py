"""``export-trials`` and ``import-trials``: trial records as JSONL (docs/trial-record.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.records import RecordError, import_records, load_records, records_from_store, write_records
from ..core.store import Store
from . import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser("export-trials", help="write finished trials as JSONL trial records")
    add_db_argument(export)
    export.add_argument("--suite", help="suite id (default: the latest suite in the store)")
    export.add_argument("--out", help="file to write (default: stdout)")
    export.set_defaults(handler=export_command)

    imp = subparsers.add_parser("import-trials", help="read JSONL trial records into the store")
    imp.add_argument("file", help="JSONL file of trial records")
    add_db_argument(imp)
    imp.set_defaults(handler=import_command)


def export_command(args: argparse.Namespace) -> int:
    if not Path(args.db).exists():
        print(f"agentmeter: no store at {args.db}", file=sys.stderr)
        return 1
    store = Store(args.db)
    records = records_from_store(store, args.suite)
    if args.out:
        tmp = Path(args.out + ".part")
        with open(tmp, "wb") as handle:
            count = write_records(records, handle)
        tmp.replace(args.out)  # never a half-written file under the real name
    else:
        count = write_records(records, sys.stdout.buffer)
        sys.stdout.flush()
    print(f"exported {count} trial(s)", file=sys.stderr)
    return 0


def import_command(args: argparse.Namespace) -> int:
    try:
        records = load_records(args.file)  # all parsed and checked before the store is touched
    except RecordError as exc:
        print(f"agentmeter: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"agentmeter: {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    store = Store(args.db)
    count = import_records(store, records)
    print(f"imported {count} trial(s) into {args.db}", file=sys.stderr)
    return 0
