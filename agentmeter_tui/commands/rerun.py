"""``agentmeter rerun --status infra-invalid,errored,killed [--task T] [--model M] [--cli C]``:
new attempts for the cells whose latest trial ended so, appended as further trials (nothing is
overwritten; the report's latest-completed rule then selects them). A running runner takes
them into its queue; on a finished store a runner is started for them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core.run.control import ControlClient, ControlError
from . import add_db_argument

STATUSES = ("infra-invalid", "errored", "killed", "failed", "passed")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("rerun", help="run finished cells again as new attempts (nothing overwritten)")
    parser.add_argument("--status", required=True, type=_statuses,
                        help=f"comma-separated statuses of a cell's latest trial to rerun ({', '.join(STATUSES)})")
    parser.add_argument("--task", help="only this task's cells")
    parser.add_argument("--model", help="only this model's cells")
    parser.add_argument("--cli", help="only this CLI's cells")
    parser.add_argument("--suite", help="suite folder (default: the one the store's suite was run from)")
    add_db_argument(parser)
    parser.add_argument("--headless", action="store_true", help="print progress instead of opening the TUI")
    parser.add_argument("--detach", action="store_true", help="leave the runner in the background and return")
    parser.set_defaults(handler=rerun_command)


def _statuses(text: str) -> list[str]:
    given = [s.strip() for s in text.split(",") if s.strip()]
    wrong = [s for s in given if s not in STATUSES]
    if wrong or not given:
        raise argparse.ArgumentTypeError(f"{', '.join(wrong) or 'nothing'}: give statuses among {', '.join(STATUSES)}")
    return given


def rerun_command(args: argparse.Namespace) -> int:
    request = {"op": "rerun", "statuses": args.status,
               **{k: v for k, v in (("task", args.task), ("model", args.model), ("cli", args.cli)) if v}}
    db = Path(args.db)
    try:
        with ControlClient(db, timeout=10) as client:
            reply = client.request(**request)
    except ControlError as exc:
        if "no runner is listening" not in str(exc):
            print(f"agentmeter rerun: {exc}", file=sys.stderr)
            return 1
    else:
        print(f"{reply.get('added', 0)} cell(s) added to the running runner's queue as new attempts")
        return 0
    return _start(args, db, request)


def _start(args: argparse.Namespace, db: Path, request: dict) -> int:
    from ..core.store import Store
    from .run import follow, resolve_suite_path, spawn_runner

    if not db.exists():
        print(f"agentmeter rerun: no store at {db}", file=sys.stderr)
        return 2
    suite = args.suite
    if suite is None:
        store = Store(db, readonly=True)
        try:
            paths = list(store.suite_paths().values())
        finally:
            store.close()
        if len(paths) != 1:
            print(f"agentmeter rerun: {db} holds {len(paths)} suites; say which with --suite", file=sys.stderr)
            return 2
        suite = paths[0]
    hello = spawn_runner(resolve_suite_path(suite), db, None, extra=["--rerun", json.dumps(request)])
    if isinstance(hello, int):
        return hello
    if hello is None or args.detach:
        print(f"runner {'finished' if hello is None else 'started'} for the rerun; see: agentmeter status --db {db}")
        return 0
    return follow(db, headless=args.headless)
