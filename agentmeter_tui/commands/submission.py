"""``agentmeter submission check DIR --rules terminal-bench-2``: a folder of Harbor jobs against a
leaderboard's rules (docs/import-export.md). Exit 0 when it complies, 1 with each violation named,
2 for a bad argument."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_VIOLATIONS, EXIT_USAGE = 1, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("submission", help="check a leaderboard submission (Harbor job folders)")
    actions = parser.add_subparsers(dest="submission_action", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="check Harbor job folders against a leaderboard's rules")
    check.add_argument("path", type=Path, metavar="DIR",
                       help="a Harbor job folder, a submission folder (metadata.yaml + jobs) or a folder of them")
    check.add_argument("--rules", choices=("terminal-bench-2",), default="terminal-bench-2",
                       help="the leaderboard's rules (default terminal-bench-2: 5 trials per task, no overrides, "
                            "every trial complete, metadata.yaml)")
    check.set_defaults(handler=check_command)


def check_command(args: argparse.Namespace) -> int:
    from ..core.harbor.submission import check_submission

    if not args.path.is_dir():
        print(f"agentmeter submission: {args.path}: not a folder", file=sys.stderr)
        return EXIT_USAGE
    result = check_submission(args.path, args.rules)
    for violation in result.violations:
        print(f"violation: {violation}")
    verdict = "complies with" if not result.violations else f"has {len(result.violations)} violation(s) of"
    print(f"{args.path}: {result.jobs} job(s), {result.trials} trial(s); {verdict} the {args.rules} rules",
          file=sys.stderr)
    return EXIT_VIOLATIONS if result.violations else 0
