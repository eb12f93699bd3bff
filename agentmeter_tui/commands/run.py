"""``agentmeter run SUITE``: start a runner for a suite and follow it (``demo`` too).

The runner is always its own process, in its own session: this command only starts it and
then becomes a client (headless progress, or the TUI), so a client that quits or dies never
stops paid trials. ``--detach`` returns as soon as the runner listens.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from ..core.paths import owner_only, runner_log_path, suites_root
from ..core.run.control import ControlClient, ControlError, runner_alive
from ..core.store import SeedHashChanged, Store
from ..core.store.check import check_file
from ..core.suites import load_suite
from ..core.tomlerrors import InputError
from . import add_db_argument

EXIT_BAD_INPUT, EXIT_HASH, EXIT_BUSY = 2, 4, 5


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run a suite's grid (starts a runner, then follows it)")
    parser.add_argument("suite", help="suite folder (or the name of one under suites/)")
    add_db_argument(parser)
    parser.add_argument("--headless", action="store_true", help="print progress instead of opening the TUI")
    parser.add_argument("--detach", action="store_true", help="leave the runner in the background and return")
    parser.add_argument("--clis-root", help="where install-clis put the agent CLIs")
    parser.set_defaults(handler=run_command)


def resolve_suite_path(name: str) -> Path:
    path = Path(name)
    if not (path / "suite.toml").exists() and (suites_root() / name / "suite.toml").exists():
        return suites_root() / name
    return path


def run_command(args: argparse.Namespace) -> int:
    return start_and_follow(resolve_suite_path(args.suite), Path(args.db), headless=args.headless,
                            detach=args.detach, clis_root=args.clis_root)


def start_and_follow(suite_path: Path, db: Path, *, headless: bool, detach: bool,
                     clis_root: str | None = None) -> int:
    if db.exists() or db.is_symlink():
        Store(db).close()  # a store that cannot be used (a folder, damaged, read-only) is named first
    else:
        check_file(db, create=True, write=True)
    try:
        suite = load_suite(suite_path)
    except InputError as exc:
        print(f"agentmeter: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for skipped in suite.skipped:
        print(f"agentmeter: task skipped: {skipped}", file=sys.stderr)
    if db.exists():
        store = Store(db, readonly=True)  # checked above
        try:
            store.check_suite(suite.id, suite.seed_hash, {t.id: t.instruction_hash for t in suite.tasks})
        except SeedHashChanged as exc:
            print(f"agentmeter: {exc}", file=sys.stderr)
            return EXIT_HASH
        finally:
            store.close()
    if runner_alive(db):
        with ControlClient(db) as client:
            hello = client.request("hello")
        if hello.get("suite") != suite.id:
            print(f"agentmeter: a runner for suite '{hello.get('suite')}' is already using {db}", file=sys.stderr)
            return EXIT_BUSY
        print(f"agentmeter: attaching to the running runner (pid {hello.get('pid')})", file=sys.stderr)
    else:
        code = spawn_runner(suite_path, db, clis_root)
        if code is not None:
            return code
    if detach:
        print(f"runner started for suite {suite.id}; follow it with: agentmeter attach --db {db}")
        return 0
    return follow(db, headless=headless)


def spawn_runner(suite_path: Path, db: Path, clis_root: str | None) -> int | None:
    """Start the runner and wait until it answers; return its exit code if it died instead."""
    command = [sys.executable, "-m", "agentmeter_tui.core.run.runner", "--suite", str(suite_path.resolve()),
               "--db", str(db.resolve())]
    if clis_root:
        command += ["--clis-root", clis_root]
    log_path = runner_log_path(db)
    owner_only(log_path)  # it can quote agent output
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True, cwd=os.getcwd())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() == 0:
            return None  # it had nothing left to do and already finished
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").splitlines()[-10:]
            print("agentmeter: the runner stopped:\n  " + "\n  ".join(tail), file=sys.stderr)
            return process.returncode or 1
        if runner_alive(db):
            return None
        time.sleep(0.02)
    print(f"agentmeter: the runner did not answer within 60 s; see {log_path}", file=sys.stderr)
    return 1


def follow(db: Path, *, headless: bool) -> int:
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
