"""Helpers of the attack tests: a suite whose agent leaves the daemon of ``agents/daemon.py``,
and the check that nothing of a trial is left on the machine afterwards."""

from __future__ import annotations

import contextlib
import signal
import sys
import textwrap
from pathlib import Path

import psutil

from agentmeter_tui.core import cgroups
from tests.waiting import pid_running

DAEMON = Path(__file__).parent / "agents" / "daemon.py"


def daemon_suite(folder: Path, pidfile: Path, then: str, wall_seconds: int = 0, sandbox: str = "") -> Path:
    """One trial of the daemon-leaving agent; ``then`` = "exit" or "stay" (until its budget kill)."""
    (folder / "task" / "tests").mkdir(parents=True)
    budget = f"[budgets.default]\nwall_seconds = {wall_seconds}\n" if wall_seconds else ""
    (folder / "suite.toml").write_text(textwrap.dedent(f"""\
        [suite]
        id = "daemon"
        max_retries = 0
        kill_grace = 1.0

        [[models]]
        id = "none"
        provider = "offline"

        [providers.offline]
        kind = "none"

        [[clis]]
        adapter = "command"
        args = ["{sys.executable}", "{DAEMON}", "{pidfile}", "{then}"]
        """) + budget + sandbox)
    (folder / "task" / "task.toml").write_text("[task]\n")
    (folder / "task" / "instruction.md").write_text("Leave a daemon behind.\n")
    (folder / "task" / "tests" / "test.sh").write_text("#!/bin/sh\nexit 0\n")
    return folder


def daemon_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text())
    except (FileNotFoundError, ValueError):
        return None


def processes_of(pidfile: Path) -> list[psutil.Process]:
    """The agent and its daemon, alive: every process whose command line names ``pidfile``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if str(pidfile) in proc.cmdline() and pid_running(proc.pid):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def kill_daemon(pidfile: Path) -> None:
    """The test's own cleanup of what the code under test failed to stop."""
    for proc in processes_of(pidfile):
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)


def leftovers(pidfile: Path, tokens: set[str], folders: list[Path]) -> list[str]:
    """What of the trials is still on the machine: the agent or its daemon, and what
    :func:`trial_leftovers` finds."""
    found = []
    if daemon_pid(pidfile) is None:
        found.append("the daemon never wrote its pid")
    found += [f"process {p.pid} ({' '.join(p.cmdline()[-3:])}) still runs" for p in processes_of(pidfile)]
    return found + trial_leftovers(tokens, folders)


def trial_leftovers(tokens: set[str], folders: list[Path]) -> list[str]:
    """A cgroup named by one of the trial tokens, a trial folder, a mount under one."""
    found = [f"cgroup {g.name}" for g in cgroups.find(tokens)]
    found += [f"trial folder {f}" for f in folders if f.exists()]
    mounts = Path("/proc/self/mountinfo").read_text()
    found += [f"mount under {f}" for f in folders if f" {f}" in mounts]
    return found
