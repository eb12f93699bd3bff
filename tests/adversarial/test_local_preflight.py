"""Issue 37: where the kernel forbids the local sandbox's namespaces, the run refuses to start
its trials, in one line that names the cause as the operator can act on it, unless the suite
says ``isolation = "none"`` (and then every transcript says so).

Two refusals of a real ``agentmeter run``: a bwrap that is installed but cannot make its
namespaces (a fake one on PATH that fails as Debian's does where unprivileged user namespaces
are off), and the real bwrap in a user namespace whose ``max_net_namespaces`` is 0 (a
container that allows no network namespace: the runner is root there, and neither bwrap's
probe nor the runner's own pool can have one). The line quotes the cause as text: not a
Python list of lines, no errno prefix, and no "install bubblewrap" when it is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.adversarial.support import command_suite, transcript
from tests.conftest import agentmeter
from tests.core.sandbox_support import unique_id

REFUSED = "cannot wall its trials in"
NO_USERNS = ("bwrap: No permissions to create new namespace, likely because the kernel does not allow "
             "non-privileged user namespaces.")


def _suite(folder: Path, sandbox: str = "") -> Path:
    return command_suite(folder, ["sh", "-c", "echo hello"], suite_id=unique_id("preflight"),
                         rest=f"\n[sandbox]\n{sandbox}\n" if sandbox else "", instruction="Say hello.")


def _fake_bwrap(folder: Path) -> Path:
    """A bwrap that fails every start as Debian's does where user namespaces are off."""
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text(f"#!/bin/sh\necho '{NO_USERNS}' >&2\nexit 1\n")
    fake.chmod(0o755)
    return folder


def _refusal(result: subprocess.CompletedProcess, db: Path) -> str:
    """The one line that refuses; nothing else happened."""
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    lines = [line for line in out.splitlines() if REFUSED in line]
    assert len(lines) == 1, out
    assert 'isolation = "none"' in lines[0] and "Traceback" not in out, out
    assert "['" not in lines[0] and "[Errno" not in lines[0], lines[0]  # text, not a repr
    assert not db.exists() or transcript(db) == []
    return lines[0]


def test_a_bwrap_that_cannot_make_namespaces_refuses_in_one_line(tmp_path, db):
    bin_folder = _fake_bwrap(tmp_path / "bin")
    suite = _suite(tmp_path / "suite")
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=300,
                        env={"PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"})
    line = _refusal(result, db)
    assert NO_USERNS in line, line  # bwrap's own words, whole
    assert "install bubblewrap" not in line, line  # it is installed: that advice would mislead


def test_a_machine_without_network_namespaces_refuses_in_one_line(tmp_path, db):
    """Root in a user namespace that may hold no network namespace (the limit is the user
    namespace's own, so the machine's is untouched)."""
    suite = _suite(tmp_path / "suite")
    script = ('echo 0 > /proc/sys/user/max_net_namespaces && exec "$@"')
    argv = ["unshare", "--user", "--map-root-user", "--", "sh", "-c", script, "sh",
            sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db", str(db)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    line = _refusal(result, db)
    assert "namespace" in line and "install bubblewrap" not in line, line


def test_isolation_none_runs_where_bwrap_cannot(tmp_path, db):
    """The suite's say-so runs the trial without walls where the walls cannot be had, and the
    transcript says so."""
    bin_folder = _fake_bwrap(tmp_path / "bin")
    suite = _suite(tmp_path / "suite", 'isolation = "none"')
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=300,
                        env={"PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, result.stdout + result.stderr
    ((trial, lines),) = transcript(db, "runner")
    assert trial["status"] == "passed", lines
    assert any(line.startswith('isolation: none (the suite says isolation = "none")') for line in lines), lines
    shutil.rmtree(tmp_path / "suite")


def test_the_pool_refusal_names_the_cause_without_errno(monkeypatch):
    """The runner's own pool refused (bwrap's probe passed): the kernel's words, no ``[Errno 28]``."""
    from agentmeter_tui.core.sandboxes import netns

    class Refusing:
        def take(self) -> int:
            raise OSError(28, "unshare(CLONE_NEWNET): No space left on device")

    monkeypatch.setattr(netns, "pool", lambda: Refusing())
    assert netns.problem() == "no network namespace for a trial: unshare(CLONE_NEWNET): No space left on device"
