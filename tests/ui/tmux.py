"""Drive the real ``agentmeter`` TUI in tmux as a person would: keys in, screen text out."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


class TmuxSession:
    """One TUI in a detached tmux session on its own tmux server (``-L``), so parallel tests
    never share a server that exits under them when another test closes its last session."""

    def __init__(self, command: list[str], env: dict[str, str], size: tuple[int, int] = (160, 48),
                 cwd: Path = ROOT):
        self.name = f"agentmeter-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # `exec` so the pane's process is the TUI itself (the attach test kills it by pid).
        # No COLUMNS or LINES from the test process: the TUI takes its size from the pane.
        shell = f"cd {shlex.quote(str(cwd))} && exec env -u COLUMNS -u LINES {exports} {shlex.join(command)}"
        # set-clipboard on: OSC 52 from the application fills tmux's paste buffer (and reaches the
        # outer terminal's clipboard), as with many operators' configurations; the hostile-output
        # tests check that nothing gets there.
        config = Path(tempfile.gettempdir()) / "agentmeter-test-tmux.conf"
        config.write_text("set -s set-clipboard on\n")
        subprocess.run(["tmux", "-L", self.name, "-f", str(config), "new-session", "-d", "-s", self.name,
                        "-x", str(size[0]), "-y", str(size[1]), shell], capture_output=True, text=True, check=True)

    def tmux(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.name, *args], capture_output=True, text=True, check=check)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name).stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", self.name, key, check=True)

    def wait_for(self, text: str) -> str:
        """Poll the screen until ``text`` shows (the TUI redraws on its own; nothing to await)."""
        last = [""]

        def shown() -> str | None:
            last[0] = self.screen()
            return last[0] if text in last[0] else None

        try:
            return wait_for(shown, repr(text), interval=0.1)
        except AssertionError:
            raise AssertionError(f"{text!r} never showed; the screen was:\n{last[0]}") from None

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", self.name).returncode == 0

    def pane_pid(self) -> int:
        return int(self.tmux("list-panes", "-t", self.name, "-F", "#{pane_pid}", check=True).stdout.split()[0])

    def close(self) -> None:
        self.tmux("kill-server")


def agentmeter(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentmeter_tui", *args]


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {"AGENTMETER_UI_CONFIG": str(tmp / "no-ui.toml"), "XDG_CONFIG_HOME": str(tmp / "config"),
           "TERM": "xterm-256color", "COLORTERM": "truecolor", "PATH": os.environ.get("PATH", "")}
    for name in ("AGENTMETER_SANDBOX_ROOT", "AGENTMETER_CLIS_DIR", "HOME"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    env.update(extra)
    return env
