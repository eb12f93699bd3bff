"""``agentmeter scores export|import|merge``: reviewers' scores between machines.

- ``export --out scores.csv``: every score (all reviewers, adjudications, history) and every
  review note (``n`` in review) as CSV.
- ``import scores.csv``: add a CSV's scores; all rows are checked first, nothing half-written.
- ``merge OTHER.db``: add another store's scores, trials matched by suite, task, configuration
  and trial index. Identical scores are not doubled; differing ones are kept as separate reviews.

Exit codes: 0 done; 1 no such store; 2 bad input (nothing written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("scores", help="export, import or merge reviewers' scores (CSV, another store)")
    actions = parser.add_subparsers(dest="scores_action", metavar="ACTION", required=True)
    export = actions.add_parser("export", help="write every score as CSV (trial, reviewer, score, note, time, role)")
    export.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    export.add_argument("--suite", metavar="ID", help="only this suite's scores")
    add_db_argument(export)
    export.set_defaults(handler=export_command)
    imp = actions.add_parser("import", help="add the scores of a CSV (identical rows are skipped)")
    imp.add_argument("csv", metavar="FILE")
    add_db_argument(imp)
    imp.set_defaults(handler=import_command)
    merge = actions.add_parser("merge", help="add another store's scores, trials matched by suite/task/config/index")
    merge.add_argument("other", metavar="OTHER.db")
    add_db_argument(merge)
    merge.set_defaults(handler=merge_command)


def _fail(message: str, code: int) -> int:
    print(f"agentmeter scores: {message}", file=sys.stderr)
    return code


def _store(path: str, readonly: bool = False):
    from ..core.store import Store

    db = Path(path)
    if not db.is_file():
        return None
    return Store(db, readonly=readonly)


def export_command(args: argparse.Namespace) -> int:
    from ..core.reporting.files import write_text_atomically
    from ..core.review.scores_io import export_csv

    store = _store(args.db, readonly=True)
    if store is None:
        return _fail(f"no store at {args.db}", 1)
    try:
        text = export_csv(store, args.suite)
    finally:
        store.close()
    if args.out:
        write_text_atomically(Path(args.out), text)
        print(f"wrote {text.count(chr(10)) - 1} score(s) to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def import_command(args: argparse.Namespace) -> int:
    from ..core.review.scores_io import import_csv_all
    from ..core.store import utcnow
    from ..core.tomlerrors import InputError

    store = _store(args.db)
    if store is None:
        return _fail(f"no store at {args.db}", 1)
    try:
        (added, already), (notes, notes_already) = import_csv_all(store, args.csv, utcnow())
    except InputError as exc:
        return _fail(f"{exc} (nothing imported)", 2)
    finally:
        store.close()
    print(f"imported {added} score(s) and {notes} note(s) from {args.csv}; "
          f"{already + notes_already} already there")
    return 0


def merge_command(args: argparse.Namespace) -> int:
    from ..core.review.scores_io import merge_store

    store = _store(args.db)
    if store is None:
        return _fail(f"no store at {args.db}", 1)
    other = _store(args.other, readonly=True)
    if other is None:
        store.close()
        return _fail(f"no store at {args.other}", 1)
    try:
        result = merge_store(store, other)
    finally:
        other.close()
        store.close()
    print(f"merged {result.added} score(s) and {result.notes_added} note(s) from {args.other}; "
          f"{result.already + result.notes_already} already there")
    if result.unmatched:
        print(f"{len(result.unmatched)} score(s) of {args.other} name trials this store does not have "
              "(suite, task, configuration, trial index); they were not merged:", file=sys.stderr)
        for row in result.unmatched[:20]:
            print(f"  trial {row['trial']} {row['key']}: {row['score']} by {row['reviewer']}", file=sys.stderr)
        return 2
    return 0
