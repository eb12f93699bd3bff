"""``agentmeter run SUITE``: start a runner for a suite and follow it (``demo`` too).

The runner is always its own process, in its own session: this command only starts it and
then becomes a client (headless progress, or the TUI), so a client that quits or dies never
stops paid trials. ``--detach`` returns as soon as the runner answers. A suite whose every
cell has its result is not run again: the command says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.run.control import ControlError
from ..core.run.launch import resolve_suite_path, spawn_runner, suite_hint  # noqa: F401 (imported from here)
from ..core.run.launch import runner_hello as _hello
from ..core.store import SeedHashChanged, Store
from ..core.store.check import check_file
from ..core.suites.load import load_suite
from ..core.tomlerrors import InputError
from . import add_db_argument
from .gridrun import add_grid_arguments, implied_suite

EXIT_BAD_INPUT, EXIT_HASH, EXIT_BUSY = 2, 4, 5


EXIT_CODES = """exit codes:
  0  the run finished, every cell has a result (or nothing was left to run)
  1  the runner ended without finishing the run (its log's last lines are printed)
  2  the suite does not load (the error names file, line and field)
  4  the suite's seed prompts changed since this store's trials (give another --db)
  5  a runner for another suite uses this store
  6  the run could not start (the reason is printed)
  7  headless: a cap holds the schedule and nothing runs; the exact command to raise it is printed,
     the runner waits (held, spending nothing) and `agentmeter run` follows it again
  8  the run finished, but some cells' last attempt ended infra-invalid (no result: see rerun)
  130  Ctrl-C: this client detached; the runner goes on

Without a terminal (cron, CI, nohup, output to a file) the run is followed headless.

examples:
  agentmeter run smoke --headless --db smoke.db
  agentmeter run ./my-suite --detach && agentmeter status --wait-cap
  agentmeter run ~/terminal-bench -m anthropic/claude-sonnet-4-5 -a claude-code -k 3 -n 4 --db tb.db
  agentmeter run terminal-bench@2.0 --registry registry.json -m openai/gpt-5 -a codex -t 'fix-*' --db tb.db"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run a suite's grid (starts a runner, then follows it)",
                                   description="Run a suite's grid: start a runner (its own process) and "
                                   "follow it in the TUI, or headless with --headless or without a terminal.",
                                   epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", help="suite folder (or the name of one under suites/), a folder of task "
                        "folders (with -m and -a), or a dataset NAME@VERSION from a registry")
    add_db_argument(parser)
    parser.add_argument("--headless", action="store_true", help="print progress instead of opening the TUI")
    parser.add_argument("--detach", action="store_true", help="leave the runner in the background and return")
    parser.add_argument("--clis-root", help="where install-clis put the agent CLIs")
    add_grid_arguments(parser)
    parser.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    db = Path(args.db)
    check_store(db)
    suite_path = implied_suite(args, db)
    if isinstance(suite_path, int):
        return suite_path
    return start_and_follow(suite_path, db, headless=args.headless, detach=args.detach, clis_root=args.clis_root)


def check_store(db: Path) -> None:
    """A store that cannot be used (a folder, damaged, read-only) is named first."""
    if db.exists() or db.is_symlink():
        Store(db).close()
    else:
        check_file(db, create=True, write=True)


def start_and_follow(suite_path: Path, db: Path, *, headless: bool, detach: bool,
                     clis_root: str | None = None) -> int:
    check_store(db)
    try:
        suite = load_suite(suite_path)
    except InputError as exc:
        print(f"agentmeter: {exc}{suite_hint(str(suite_path))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for skipped in suite.skipped:
        print(f"agentmeter: task skipped: {skipped}", file=sys.stderr)
    left = None
    if db.exists():
        from ..core.run.scheduler import cells_left  # the schedule's rule (it imports the run engine)

        store = Store(db, readonly=True)  # checked above
        try:
            store.check_suite(suite.id, suite.seed_hash, {t.id: t.instruction_hash for t in suite.tasks})
            left = cells_left(store, suite)
        except SeedHashChanged as exc:
            print(f"agentmeter: {exc}", file=sys.stderr)
            return EXIT_HASH
        finally:
            store.close()
    hello = _hello(db)
    attached = hello is not None
    if hello is not None:
        if hello.get("suite") != suite.id:
            print(f"agentmeter: a runner for suite '{hello.get('suite')}' is already using {db}", file=sys.stderr)
            return EXIT_BUSY
        print(f"agentmeter: attaching to the running runner (pid {hello.get('pid')})", file=sys.stderr)
    elif left == 0:
        print(f"suite {suite.id} is complete in {db}: every cell has its result, nothing to run. "
              f"See it with: agentmeter report --db {db}; to run it again, give another --db.")
        return 0
    else:
        spawned = spawn_runner(suite_path, db, clis_root)
        if isinstance(spawned, int):
            return spawned
        hello = spawned
    if detach:
        if hello is None:  # it ended before it answered: nothing was left to run
            print(f"the runner for suite {suite.id} finished at once; see: agentmeter status --db {db}")
            return 0
        doing = f"; now preparing: {hello['preparing']}" if hello.get("preparing") else ""
        print(f"runner {'running' if attached else 'started'} for suite {suite.id} (pid {hello.get('pid')}){doing}\n"
              f"follow it: agentmeter attach --db {db} · stop it: agentmeter stop --db {db}")
        return 0
    return follow(db, headless=headless)


def no_terminal() -> bool:
    """stdin or stdout is not a terminal (cron, CI, nohup, output into a file): a TUI there
    draws into the file and never returns, so the run is followed headless, saying so."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return False
    print("agentmeter: no terminal: following the run headless (progress lines)", file=sys.stderr)
    return True


def follow(db: Path, *, headless: bool) -> int:
    headless = headless or no_terminal()
    if not headless:
        try:
            from ..ui.app import run_app
        except ImportError:
            headless = True  # the TUI is optional for a headless install
        else:
            return run_app(db=db, mode="live")
    from .headless import follow_headless

    try:
        return follow_headless(db)
    except ControlError as exc:
        print(f"agentmeter: {exc}", file=sys.stderr)
        return 1
