"""``agentmeter rerun --status infra-invalid,errored,killed [--task T] [--model M] [--cli C]``:
new attempts for the cells whose latest trial ended so, appended as further trials (nothing is
overwritten; the report's latest-completed rule then selects them). A running runner takes
them into its queue; on a finished store a runner is started for them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.run.launch import request_rerun
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
    outcome = request_rerun(db, request, args.suite)  # the TUI's rerun keys take this path too
    print(outcome.message, file=sys.stdout if outcome.code == 0 else sys.stderr)
    if not outcome.started or args.detach:
        return outcome.code
    from .run import follow

    return follow(db, headless=args.headless)
