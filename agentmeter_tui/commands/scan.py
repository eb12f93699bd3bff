"""``agentmeter scan``: run the triage scanners over a store's finished trials and list what
they flagged; ``agentmeter flag FLAG_ID right|wrong``: a reviewer's verdict on one flag
(append-only: the latest verdict counts, the earlier ones stay)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    scan = subparsers.add_parser("scan", help="flag finished trials a reviewer should look at first (triage scanners)")
    scan.add_argument("--suite", metavar="ID", help="only this suite's trials (default: every suite)")
    scan.add_argument("--scanner", action="append", metavar="NAME", help="run only these scanners (repeatable)")
    scan.add_argument("--list", action="store_true", help="name the scanners and what each flags, then stop")
    add_db_argument(scan)
    scan.set_defaults(handler=scan_command)

    flag = subparsers.add_parser("flag", help="a reviewer's verdict on a triage flag: right or wrong (append-only)")
    flag.add_argument("flag_id", type=int, metavar="FLAG_ID", help="the flag's id (agentmeter scan lists them)")
    flag.add_argument("verdict", choices=("right", "wrong"), help="right: the trial shows it; wrong: a false alarm")
    flag.add_argument("--note", metavar="TEXT", help="why; kept with the verdict")
    flag.add_argument("--by", metavar="NAME", help="reviewer (default: $AGENTMETER_REVIEWER, else the login name)")
    add_db_argument(flag)
    flag.set_defaults(handler=flag_command)


def _store(db: str, command: str):
    from ..core.store import Store

    if not Path(db).is_file():
        print(f"agentmeter {command}: no store at {db}", file=sys.stderr)
        return None
    return Store(db)


def scan_command(args: argparse.Namespace) -> int:
    from ..core.scanners import SCANNERS, scanners
    from ..core.scanners.scan import scan_store

    if args.list:
        for scanner in scanners():
            print(f"{scanner.name}: {scanner.summary}")
        return 0
    unknown = [name for name in args.scanner or [] if name not in SCANNERS]
    if unknown:
        print(f"agentmeter scan: no scanner {', '.join(unknown)}; known: {', '.join(SCANNERS.names())}",
              file=sys.stderr)
        return 2
    store = _store(args.db, "scan")
    if store is None:
        return 1
    outcome = scan_store(store, args.suite, args.scanner)
    trials = {row["id"]: row for row in store.trials(args.suite)}
    for trial_id, flags in store.flags.flags_of(list(trials)).items():
        for flag in flags:
            verdict = f" [{flag.verdict} by {flag.reviewer}]" if flag.verdict else ""
            events = ", ".join(str(seq) for seq in flag.evidence)
            print(f"flag {flag.id} trial {trial_id} {flag.scanner}: {flag.why} (events {events or '-'}){verdict}")
    print(outcome.summary(), file=sys.stderr)
    return 0


def flag_command(args: argparse.Namespace) -> int:
    from ..core.review.reviewing import default_reviewer

    store = _store(args.db, "flag")
    if store is None:
        return 1
    reviewer = (args.by or "").strip() or default_reviewer()
    try:
        store.flags.add_flag_verdict(args.flag_id, args.verdict, reviewer, args.note)
    except KeyError:
        print(f"agentmeter flag: no flag {args.flag_id} in {args.db}", file=sys.stderr)
        return 1
    print(f"flag {args.flag_id}: {args.verdict} (by {reviewer})")
    return 0
