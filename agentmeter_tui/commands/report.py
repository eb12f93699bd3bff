"""``agentmeter report``: the Table-2 style report of a suite, with rubric, rank validation and charts.

Exit codes: 0 written; 1 no such store or suite; 2 bad input (a task list, a suite's
[scoring]); 3 the honesty gate failed (``--rubric`` on a suite that names its own tool),
in which case nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.metrics.intervals import DEFAULT_RESAMPLES, DEFAULT_SEED
from ..core.reporting.formats import FORMATS, FolderFormat
from . import add_db_argument

if TYPE_CHECKING:
    from ..core.reporting.report import Report
    from ..core.store import Store

EXIT_MISSING, EXIT_BAD_INPUT, EXIT_GATE = 1, 2, 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="success, token, cost and AgentMeter Score tables for a suite")
    add_db_argument(parser)
    parser.add_argument("--suite", metavar="ID", help="suite id in the store (default: the latest suite)")
    parser.add_argument("--format", choices=FORMATS.names(), default="md",
                        help=f"output format: {', '.join(FORMATS.names())} (default md); html: a static site "
                             "into the folder --out names")
    parser.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout (html: the site's folder)")
    parser.add_argument("--blind", action="store_true", help="html: no model or CLI name anywhere in the site")
    parser.add_argument("--select", choices=("latest", "median"), default="latest",
                        help="trial per cell: latest completed (the paper's rule, default) or the median trial")
    parser.add_argument("--rubric", action="store_true",
                        help="add the 0-3 rubric table and winrates; enforce the suite's honesty gate")
    parser.add_argument("--agreement", action="store_true",
                        help="add agreement between reviewers: weighted kappa per pair, Krippendorff's alpha, exact share")
    parser.add_argument("--validate", metavar="TASKLIST",
                        help="rank validation against a subset: a file of task ids, one per line (# comments)")
    parser.add_argument("--charts", metavar="DIR", help="also write the charts (SVG and PNG) into DIR")
    parser.add_argument("--detail", action="store_true", help="JSON: add SR, CBQ, CostAUBQC, EFR per tier")
    parser.add_argument("--intervals", type=_resamples, nargs="?", const=DEFAULT_RESAMPLES, default=0,
                        metavar="N", help="add 95%% bootstrap intervals over tasks for Pass, USD/Pass and AMS, rank "
                        f"shares and paired comparisons (N resamples, default {DEFAULT_RESAMPLES})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"the bootstrap's seed (default {DEFAULT_SEED}): the same seed, the same report")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), type=Path,
                        help="compare two stores (their --suite, else each one's latest suite): per task flips and "
                             "reward changes, per configuration the paired AMS difference with its interval "
                             "(md or json; html: B's site with a comparison page and A's flips on the index)")
    parser.add_argument("--tui", action="store_true",
                        help="with --compare: open the comparison in the TUI (on B's store)")
    parser.set_defaults(handler=report_command)


def _resamples(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if not 100 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError("between 100 and 1,000,000 resamples")
    return value


def _fail(message: str, code: int) -> int:
    print(f"agentmeter report: {message}", file=sys.stderr)
    return code


def report_command(args: argparse.Namespace) -> int:
    from ..core.reporting import read_task_list, render, report_from_store
    from ..core.reporting.files import write_text_atomically
    from ..core.store import Store
    from ..core.tomlerrors import InputError

    if args.compare:
        return compare_command(args)
    db = Path(args.db)
    fmt = FORMATS.get(args.format)()
    folder = isinstance(fmt, FolderFormat)
    if folder:
        if not args.out:
            return _fail(f"--format {args.format} writes a folder: name it with --out DIR", EXIT_BAD_INPUT)
        args.rubric = args.agreement = True  # a folder shows both (an empty section says so)
        args.intervals = args.intervals or DEFAULT_RESAMPLES
    elif args.blind:
        return _fail(f"--blind goes with a folder format such as html, not {args.format} "
                     "(the review screen has its own blind mode)", EXIT_BAD_INPUT)
    if not db.is_file():
        return _fail(f"no store at {db} (run a suite or `agentmeter import-trials` first)", EXIT_MISSING)
    try:
        subset = read_task_list(args.validate) if args.validate else None
        store = Store.for_reading(db)
        try:
            report = report_from_store(store, args.suite, selection=args.select, rubric=args.rubric,
                                       subset=subset, subset_source=args.validate,
                                       agreement=args.agreement, resamples=args.intervals, seed=args.seed,
                                       defer_intervals=isinstance(fmt, FolderFormat) and fmt.defers_intervals)
            if isinstance(fmt, FolderFormat):  # a folder shows the gate's verdict, passed or failed
                # From the same store: it only reads it, and a writer's open scans every page
                # (1.5 s of a paper grid's 10 s site).
                return _write_folder(fmt, store, report, Path(args.out), args.blind)
        finally:
            store.close()
    except (InputError, ValueError) as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except LookupError as exc:
        return _fail(str(exc), EXIT_MISSING)
    gate = report.rubric.gate if report.rubric is not None else None
    if gate is not None and not gate.passed:
        return _fail(gate.message + " Nothing was written.", EXIT_GATE)
    text = render(report, args.format, detail=args.detail)
    if args.out:
        write_text_atomically(Path(args.out), text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.charts:
        from ..core.reporting.charts import write_charts

        for path in write_charts(report, Path(args.charts)):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _write_folder(fmt: FolderFormat, store: Store, report: Report, out: Path, blind: bool) -> int:
    try:
        summary = fmt.write(store, report, out, blind=blind)
    except OSError as exc:
        return _fail(f"{out}: {exc.strerror or exc}", EXIT_BAD_INPUT)
    print(summary, file=sys.stderr)
    return 0


def _compare_tui(args: argparse.Namespace) -> int:
    """The comparison as a TUI screen, on B's store (A is read when the screen opens)."""
    for path in args.compare:
        if not path.is_file():
            return _fail(f"no store at {path}", EXIT_MISSING)
    from ..ui.app import run_app

    return run_app(args.compare[1], mode="review", screen="runs", suite=args.suite, versus=args.compare[0])


def _compare_site(args: argparse.Namespace, result) -> int:
    """B's site (``--compare A B``: B is the run published, A the one it is compared with)."""
    from ..core.reporting import report_from_store
    from ..core.store import Store

    fmt = FORMATS.get("html")()
    assert isinstance(fmt, FolderFormat)  # "html" is the site, a folder: the narrowing for the checker
    store = Store.for_reading(args.compare[1])
    try:
        report = report_from_store(store, args.suite, selection=args.select, rubric=True, agreement=True,
                                   resamples=args.intervals or DEFAULT_RESAMPLES, seed=args.seed,
                                   defer_intervals=fmt.defers_intervals)
        try:
            summary = fmt.write(store, report, Path(args.out), blind=args.blind, comparison=result)
        except OSError as exc:
            return _fail(f"{args.out}: {exc.strerror or exc}", EXIT_BAD_INPUT)
    finally:
        store.close()
    print(summary + "; compare.html: the comparison", file=sys.stderr)
    return 0


def compare_command(args: argparse.Namespace) -> int:
    import orjson

    from ..core.reporting.compare import compare_stores, render_markdown
    from ..core.reporting.files import write_text_atomically
    from ..core.tomlerrors import InputError

    if args.format not in ("md", "json", "html"):
        return _fail(f"--compare writes md, json or html, not {args.format}", EXIT_BAD_INPUT)
    if args.format == "html" and not args.out:
        return _fail("--compare A B --format html writes B's site with the comparison: name its folder with --out DIR",
                     EXIT_BAD_INPUT)
    if args.blind and args.format != "html":
        return _fail("--blind goes with --format html", EXIT_BAD_INPUT)
    if args.tui:
        return _compare_tui(args)
    try:
        store_a, store_b = args.compare
        result = compare_stores(store_a, store_b, args.suite, selection=args.select,
                                resamples=args.intervals or DEFAULT_RESAMPLES, seed=args.seed)
    except (InputError, ValueError) as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except LookupError as exc:
        return _fail(str(exc), EXIT_MISSING)
    if args.format == "html":
        return _compare_site(args, result)
    text = render_markdown(result) if args.format == "md" else \
        orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
    if args.out:
        write_text_atomically(Path(args.out), text)
    else:
        sys.stdout.write(text)
    return 0
