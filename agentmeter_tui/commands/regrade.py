"""``agentmeter regrade [--task T] [--model M] [--cli C] [--status ...]``: run each selected
trial's task verifier as it is now on the trial's kept final workspace, in a fresh sandbox of the
suite's kind, and append the new verdict (``core/regrade``). ``--clean`` frees the kept
workspaces of the selected trials instead (they can no longer be regraded).

Exit codes: 0 every selected trial regraded; 1 no trial matches, or some could not be regraded
(one line each, the others are regraded); 2 a bad argument or a suite that cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from pathlib import Path

from . import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("regrade", help="run the task's current verifier again on trials' kept final "
                                   "workspaces; new verdicts appended, originals kept")
    parser.add_argument("--suite", metavar="ID", help="the suite (default: the store's latest)")
    parser.add_argument("--task", metavar="T", help="only this task's trials")
    parser.add_argument("--model", metavar="M", help="only this model's trials")
    parser.add_argument("--cli", metavar="C", help="only this CLI's trials")
    parser.add_argument("--status", metavar="S,...", default="passed,failed",
                        help="only trials whose own status is one of these (default passed,failed)")
    parser.add_argument("--clean", action="store_true", help="remove the selected trials' kept workspaces instead")
    add_db_argument(parser)
    parser.set_defaults(handler=regrade_command)


def _fail(message: str, code: int) -> int:
    print(f"agentmeter regrade: {message}", file=sys.stderr)
    return code


def regrade_command(args: argparse.Namespace) -> int:
    from ..core.regrade import keep
    from ..core.regrade.regrade import regrade_trials, select_trials, why_not_regradable
    from ..core.store import Store
    from ..core.suites.load import load_suite
    from ..core.tomlerrors import InputError
    from ..core.vocab import FINAL_STATUSES

    statuses = [s.strip() for s in args.status.split(",") if s.strip()]
    if bad := [s for s in statuses if s not in {str(f) for f in FINAL_STATUSES}]:
        return _fail(f"--status {','.join(bad)}: not a final status ({', '.join(sorted(map(str, FINAL_STATUSES)))})", 2)
    if not Path(args.db).is_file():
        return _fail(f"no store at {args.db}", 2)
    store = Store(args.db)
    row = store.suite_row(args.suite)
    if row is None:
        return _fail(f"no suite '{args.suite}' in {args.db}" if args.suite else f"no suite in {args.db}", 2)
    picked = {k: v for k, v in (("task", args.task), ("model", args.model), ("cli", args.cli)) if v}
    trials = select_trials(store, row["id"], statuses=statuses, **picked)
    if not trials:
        given = " ".join(f"--{k} {v}" for k, v in picked.items())
        return _fail(f"no trial of suite {row['id']} matches {given + ' ' if given else ''}--status {args.status}", 1)
    if args.clean:
        for trial in trials:
            if trial.get("kept"):
                shutil.rmtree(keep.kept_folder(store.path, trial["kept"]), ignore_errors=True)
                store.regrades.set_kept(trial["id"], None)
        print(f"kept workspaces of {sum(1 for t in trials if t.get('kept'))} trial(s) removed")
        return 0
    if not row.get("path") or not (Path(row["path"]) / "suite.toml").is_file():
        return _fail(f"suite {row['id']}: its folder {row.get('path') or '(none: imported)'} is not there; "
                     "a regrade runs the task's verifier as the suite folder has it now", 2)
    try:
        suite = load_suite(row["path"])
    except InputError as exc:
        return _fail(str(exc), 2)
    ready, refused = [], 0
    for trial in trials:
        if (why := why_not_regradable(trial, suite, store.path)) is None:
            ready.append(trial)
        else:
            refused += 1
            print(f"agentmeter regrade: trial {trial['id']} ({trial['task_id']}, {trial['model']}, "
                  f"{trial['cli']}): {why}", file=sys.stderr)
    try:
        asyncio.run(regrade_trials(store, suite, ready, lambda done: print(done.line())))
    except RuntimeError as exc:  # the sandbox cannot run here (no bwrap, no engine): one line
        return _fail(str(exc), 2)
    print(f"regraded {len(ready)} trial(s)" + (f"; {refused} could not be (named above)" if refused else ""),
          file=sys.stderr)
    return 1 if refused else 0
