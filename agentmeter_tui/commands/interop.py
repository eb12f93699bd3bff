"""``agentmeter import harbor|atif|sessions`` and ``agentmeter export atif|harbor-jobs`` (docs/import-export.md).

Every importer goes on past a bad item: it names the file (and line), imports the rest, and
exits 1 at the end with the count it skipped. Importing the same thing twice adds nothing.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from ..core.interop.sessions import session_clis
from . import add_db_argument

EXIT_SKIPPED = 1
EXIT_USAGE = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    imp = subparsers.add_parser("import", help="import runs made elsewhere: Harbor jobs, ATIF files, CLI sessions")
    kinds = imp.add_subparsers(dest="import_kind", metavar="SOURCE", required=True)

    harbor = kinds.add_parser("harbor", help="a Harbor job folder (harbor run -o jobs), or a folder of them")
    harbor.add_argument("job_dir", type=Path, metavar="JOB_DIR",
                        help="a job folder, or a folder of job or submission folders (export harbor-jobs)")
    harbor.add_argument("--suite", help="suite id (default: harbor-JOBNAME)")
    harbor.add_argument("--pass-threshold", type=float, default=None, metavar="R",
                        help="reward at which a trial passes (default 1.0, as for Harbor tasks run here)")
    _common(harbor)
    harbor.set_defaults(handler=import_harbor)

    atif = kinds.add_parser("atif", help="ATIF trajectory files (any producer, ATIF-v1.0 on)")
    atif.add_argument("files", nargs="+", type=Path, metavar="FILE")
    atif.add_argument("--suite", help="suite id (default: the suite a file of ours names, else 'atif')")
    _common(atif)
    atif.set_defaults(handler=import_atif)

    sessions = kinds.add_parser("sessions", help="an agent CLI's own session store")
    sessions.add_argument("--cli", required=True, metavar="NAME", help=", ".join(session_clis()))
    sessions.add_argument("path", nargs="?", type=Path, metavar="PATH",
                          help="the store's folder (default: the CLI's own under your home)")
    sessions.add_argument("--since", metavar="DATE", help="only sessions started on or after DATE (ISO 8601)")
    sessions.add_argument("--project", metavar="PATH", help="only sessions run in this project folder")
    sessions.add_argument("--suite", help="suite id (default: sessions-CLI-HOST)")
    _common(sessions)
    sessions.set_defaults(handler=import_sessions)

    exp = subparsers.add_parser("export", help="write trials in another tool's format")
    formats = exp.add_subparsers(dest="export_kind", metavar="FORMAT", required=True)
    atif_out = formats.add_parser("atif", help="one ATIF trajectory.json per trial (Harbor's newest schema)")
    which = atif_out.add_mutually_exclusive_group()
    which.add_argument("--trial", type=int, action="append", metavar="ID", help="a trial id (repeatable)")
    which.add_argument("--suite", help="every finished trial of a suite (default: the latest suite)")
    atif_out.add_argument("--out", required=True, type=Path, metavar="DIR")
    add_db_argument(atif_out)
    atif_out.set_defaults(handler=export_atif)
    jobs = formats.add_parser("harbor-jobs", help="Harbor job folders and metadata.yaml per configuration "
                                                  "(a leaderboard submission)")
    jobs.add_argument("--suite", help="the suite (default: the latest suite)")
    jobs.add_argument("--out", required=True, type=Path, metavar="DIR", help="a new or empty folder")
    add_db_argument(jobs)
    jobs.set_defaults(handler=export_harbor_jobs)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prices", type=Path, metavar="FILE",
                        help="price snapshot for the comparable cost (default: genai-prices' bundled data, today)")
    add_db_argument(parser)


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"agentmeter: {message}", file=sys.stderr)
    return code


def _pricer(args: argparse.Namespace):
    """The pricer for ``--prices``; None (the error said) when the snapshot file is bad."""
    from ..core.interop.trials import Pricer
    from ..core.pricing import PriceSnapshot
    from ..core.tomlerrors import InputError

    try:
        return Pricer(PriceSnapshot.load(args.prices) if args.prices else None)
    except (InputError, OSError) as exc:
        _fail(f"--prices: {exc}")
        return None


def _finish(outcome, what: str, db: str, suite: str | None = None) -> int:
    for item in outcome.skipped:
        print(f"agentmeter: skipped {item}", file=sys.stderr)
    suites = sorted(outcome.suites or ({suite} if suite else set()))
    where = f" (suite {', '.join(suites)})" if suites else ""
    print(f"{outcome.summary(what)} into {db}{where}", file=sys.stderr)
    if outcome.skipped:
        print(f"agentmeter: {len(outcome.skipped)} item(s) skipped (named above)", file=sys.stderr)
        return EXIT_SKIPPED
    return 0


def import_harbor(args: argparse.Namespace) -> int:
    from ..core.harbor.exporter import job_folders
    from ..core.harbor.importer import PASS_THRESHOLD, job_name, read_job
    from ..core.interop.trials import store_all
    from ..core.store import Store

    if not args.job_dir.is_dir():
        return _fail(f"{args.job_dir}: not a folder")
    threshold = PASS_THRESHOLD if args.pass_threshold is None else args.pass_threshold
    if (pricer := _pricer(args)) is None:
        return EXIT_USAGE
    jobs = job_folders(args.job_dir) or [args.job_dir]  # no trial folder yet: an empty job, nothing to import
    store = Store(args.db)
    known = store.imports.import_keys("harbor:")
    items = (item for job in jobs for item in read_job(job, args.suite, threshold, known=known))
    outcome = store_all(store, items, pricer)
    return _finish(outcome, "trial(s)", args.db, args.suite or f"harbor-{job_name(jobs[0])}")


def import_atif(args: argparse.Namespace) -> int:
    from ..core.interop.atif_import import read_files
    from ..core.interop.trials import store_all
    from ..core.store import Store

    if (pricer := _pricer(args)) is None:
        return EXIT_USAGE
    store = Store(args.db)
    items = read_files(args.files, args.suite, known=store.imports.import_keys("atif:"))
    return _finish(store_all(store, items, pricer), "trajectory(ies)", args.db, args.suite)


def import_sessions(args: argparse.Namespace) -> int:
    from ..core.interop.sessions import default_path, default_suite, read_sessions, session_clis
    from ..core.interop.trials import store_all
    from ..core.store import Store

    if args.cli not in session_clis():
        return _fail(f"--cli {args.cli}: no session reader for it; known: {', '.join(session_clis())}")
    since = None
    if args.since:
        try:
            since = datetime.fromisoformat(args.since)
        except ValueError:
            return _fail(f"--since {args.since!r}: not an ISO 8601 date")
        since = since if since.tzinfo else since.replace(tzinfo=UTC)
    root = args.path or default_path(args.cli)
    if not root.exists():
        return _fail(f"{root}: no such folder (the {args.cli} session store)")
    if (pricer := _pricer(args)) is None:
        return EXIT_USAGE
    store = Store(args.db)
    items = read_sessions(args.cli, root, suite=args.suite, since=since, project=args.project,
                          known=store.imports.import_keys(f"session:{args.cli}:"))
    suite = args.suite or default_suite(args.cli)
    return _finish(store_all(store, items, pricer), "session(s)", args.db, suite)


def export_atif(args: argparse.Namespace) -> int:
    from ..core.interop.atif import trial_trajectory, write_trajectory
    from ..core.store import Store
    from ..core.vocab import TrialStatus

    if not Path(args.db).exists():
        return _fail(f"no store at {args.db}")
    store = Store(args.db, readonly=True)
    if args.trial:
        trials = [t for t in (store.trial(i) for i in args.trial) if t is not None]
        missing = sorted(set(args.trial) - {t["id"] for t in trials})
        if missing:
            return _fail(f"no trial {', '.join(map(str, missing))} in {args.db}")
    else:
        suite = args.suite or store.views.latest_trial_suite()
        trials = [t for t in store.trials(suite) if TrialStatus(t["status"]).is_final] if suite else []
        if not trials:
            return _fail(f"no finished trial in suite {suite!r}")
    for trial in trials:
        write_trajectory(trial_trajectory(store, trial["id"]), args.out / f"trial-{trial['id']}" / "trajectory.json")
    print(f"exported {len(trials)} trajectory(ies) to {args.out}", file=sys.stderr)
    return 0



def export_harbor_jobs(args: argparse.Namespace) -> int:
    from ..core.harbor.exporter import export_jobs
    from ..core.reporting.records import STATUSES
    from ..core.store import Store

    if not Path(args.db).exists():
        return _fail(f"no store at {args.db}")
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        return _fail(f"{args.out}: not an empty folder (nothing is overwritten)")
    store = Store(args.db, readonly=True)
    try:
        row = store.suite_row(args.suite)
        if row is None:
            return _fail(f"no suite {args.suite!r} in {args.db}" if args.suite else f"no suite in {args.db}", 1)
        partial = args.out.with_name(args.out.name + ".part")
        if partial.exists():
            import shutil

            shutil.rmtree(partial)
        folders = export_jobs(store, row["id"], partial, STATUSES)
    finally:
        store.close()
    if args.out.exists():
        args.out.rmdir()
    partial.replace(args.out)  # a failed export leaves no half-written submission
    print(f"exported {len(folders)} submission folder(s) of suite {row['id']} to {args.out}", file=sys.stderr)
    return 0
