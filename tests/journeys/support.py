"""What the journeys share: the real `agentmeter` commands, as a person types them, and the tmux
driver of the real TUI (tests/ui/tmux.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.ui.tmux import ROOT, TmuxSession, agentmeter, clean_env

__all__ = ["ROOT", "SMOKE", "TmuxSession", "agentmeter", "clean_env", "command", "typed"]

SMOKE = ROOT / "suites" / "smoke"


def command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """One `agentmeter` command in a subprocess, as typed in a shell (never in-process: the
    journeys check what a person sees, exit code and output included)."""
    return subprocess.run([sys.executable, "-m", "agentmeter_tui", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})})


def typed(session: TmuxSession, text: str) -> None:
    """Characters typed into the TUI as they are (tmux's -l: no key names)."""
    session.tmux("send-keys", "-t", session.name, "-l", text, check=True)


def report(db: Path, *extra: str) -> str:
    done = command("report", "--db", str(db), *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout
