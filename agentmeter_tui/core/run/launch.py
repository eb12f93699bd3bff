"""Starting a runner in its own process, and asking for a rerun: shared by the command line
(``agentmeter run``, ``agentmeter rerun``) and the TUI's rerun keys, so both take one path.

The runner is always its own process, in its own session: a client that quits never stops
paid trials. A rerun goes to the runner that is listening on the store, or, on a finished
store, to a runner started for it (``--rerun REQUEST``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import owner_only, runner_log_path, socket_path, suites_root
from .control import ControlClient, ControlError, HelloReply, NotListening


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


def resolve_suite_path(name: str) -> Path:
    path = Path(name)
    if not (path / "suite.toml").exists() and (suites_root() / name / "suite.toml").exists():
        return suites_root() / name
    return path


def suite_hint(name: str) -> str:
    """For a suite folder that is not there: the built-in suite of that name, by its id
    (``suites/smoke`` outside a checkout is ``smoke``), or nothing."""
    path = Path(name)
    if (path / "suite.toml").exists() or not (suites_root() / path.name / "suite.toml").exists():
        return ""
    return f" (no suite folder {name} here; the built-in suite is named by its id: {path.name})"


def runner_hello(db: Path) -> HelloReply | None:
    """The runner's ``hello`` reply, or None when no runner answers for ``db``."""
    try:
        with ControlClient(db, timeout=2) as client:
            return client.request("hello")
    except (ControlError, OSError, ValueError):
        return None


def spawn_runner(suite_path: Path, db: Path, clis_root: str | None, extra: Sequence[str] = (),
                 say: Callable[[str], None] = _stderr) -> HelloReply | int | None:
    """Start the runner and wait until it answers: its ``hello`` reply; its exit code if it
    died instead; None if it finished before answering (nothing was left to run). The runner
    answers as soon as it holds the store, before it prepares anything (image builds take
    minutes; they are shown by the client, not waited for here). ``say`` hears what the
    waiting has to tell (stderr for the command line; the TUI shows it)."""
    command = [sys.executable, "-m", "agentmeter_tui.core.run.runner", "--suite", str(suite_path.resolve()),
               "--db", str(db.resolve())]
    if clis_root:
        command += ["--clis-root", clis_root]
    command += extra  # e.g. `--rerun REQUEST`
    log_path = runner_log_path(db)
    owner_only(log_path)  # it can quote agent output
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True, cwd=os.getcwd())
    told = time.monotonic() + 60
    while True:
        if process.poll() == 0:
            return None  # it had nothing left to do and already finished
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").splitlines()[-10:]
            say("agentmeter: the runner stopped:\n  " + "\n  ".join(tail))
            return process.returncode or 1
        if socket_path(db).exists() and (hello := runner_hello(db)) is not None:
            return hello
        if time.monotonic() > told:  # a machine under load: say so, and go on waiting while it lives
            say(f"agentmeter: the runner (pid {process.pid}) has not answered yet; still waiting "
                f"(Ctrl-C leaves it running; its log: {log_path})")
            told = float("inf")
        time.sleep(0.02)


@dataclass
class RerunOutcome:
    """What became of a rerun request: ``code`` 0 when it was taken (exit code otherwise),
    ``message`` one line for the operator, ``started`` when a runner was started for it (and
    is still running: the caller may follow it), ``added`` the cells a running runner queued."""

    code: int
    message: str
    started: bool = False
    added: int | None = None


def request_rerun(db: Path, request: dict[str, Any], suite: str | None = None,
                  say: Callable[[str], None] = _stderr) -> RerunOutcome:
    """Send ``request`` (op ``rerun``) to the runner on ``db``; with none listening, start one
    for it from ``suite`` (default: the folder the store's suite was run from)."""
    try:
        with ControlClient(db, timeout=10) as client:
            reply = client.request(**request)
    except ControlError as exc:
        if not isinstance(exc, NotListening):
            return RerunOutcome(1, f"agentmeter rerun: {exc}")
    except OSError as exc:  # a runner too busy to answer in time, or its socket gone bad
        return RerunOutcome(1, f"agentmeter rerun: the runner did not answer ({exc or type(exc).__name__}); "
                               "try again")
    else:
        added = int(reply.get("added", 0))
        return RerunOutcome(0, f"{added} cell(s) added to the running runner's queue as new attempts", added=added)
    if not db.exists():
        return RerunOutcome(2, f"agentmeter rerun: no store at {db}")
    if suite is None:
        from ..store import Store

        store = Store(db, readonly=True)
        try:
            paths = list(store.runs.suite_paths().values())
        finally:
            store.close()
        if len(paths) != 1:
            return RerunOutcome(2, f"agentmeter rerun: {db} holds {len(paths)} suites; say which with --suite")
        suite = paths[0]
    hello = spawn_runner(resolve_suite_path(suite), db, None, extra=["--rerun", json.dumps(request)], say=say)
    if isinstance(hello, int):
        return RerunOutcome(hello, "agentmeter rerun: the runner started for it stopped (see its log)")
    if hello is None:
        return RerunOutcome(0, f"runner finished for the rerun: nothing was left to run; see: agentmeter status --db {db}")
    return RerunOutcome(0, f"runner started for the rerun (pid {hello.get('pid')}); see: agentmeter status --db {db}",
                        started=True)
