"""Drive the real ``agentmeter`` TUI in tmux as a person would: keys in, screen text out."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class TmuxSession:
    def __init__(self, command: list[str], env: dict[str, str], size: tuple[int, int] = (160, 48)):
        self.name = f"agentmeter-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # `exec` so the pane's process is the TUI itself (the attach test kills it by pid).
        shell = f"cd {shlex.quote(str(ROOT))} && exec env {exports} {shlex.join(command)}"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(size[0]), "-y", str(size[1]),
                        shell], check=True)

    def screen(self) -> str:
        result = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True)
        return result.stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            subprocess.run(["tmux", "send-keys", "-t", self.name, key], check=True)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        """Poll the screen until ``text`` shows (the TUI redraws on its own; nothing to await)."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never showed; the screen was:\n{screen}")

    def alive(self) -> bool:
        return subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode == 0

    def pane_pid(self) -> int:
        out = subprocess.run(["tmux", "list-panes", "-t", self.name, "-F", "#{pane_pid}"], capture_output=True,
                             text=True, check=True).stdout
        return int(out.split()[0])

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


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
