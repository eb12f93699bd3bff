"""Issue 37's walls when the runner is not root (an operator's own account): bwrap takes a user
namespace (``--unshare-user``) and the agent keeps the runner's uid, so the uid wall is gone,
but the namespaces and the view still hold: the agent reads no environment of the runner's
(its planted key), sees none of its processes, reaches neither the store nor the control
socket, and writes nothing of the host's but its folders, not even the operator's own folder,
which its uid could write on the host. Where the kernel refuses unprivileged user namespaces
the run refuses in one line instead, and the test checks that.

The runner runs as a uid of no account (below the trial pool), in a private mount namespace
where each folder on the way to the interpreter that this uid could not pass (a 0700 /root
holding pyenv) is a 0755 tmpfs holding only the way on; the host's folders stay as they are."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from agentmeter_tui.core.paths import PACKAGE_ROOT, socket_path
from tests.adversarial.support import transcript
from tests.adversarial.test_local_namespaces import KEY, SNOOP, _agents, _stdout_findings, _suite
from tests.waiting import wait_for

OPERATOR = 1_899_000_000 + os.getpid() % 100_000  # no account has it, and the trial pool starts above


def _blocked(paths: list[str]) -> dict[str, set[str]]:
    """The first folder on the way to each path that others cannot pass, with the child on the way."""
    found: dict[str, set[str]] = {}
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts)):
            folder = str(Path(*parts[:depth]))
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                found.setdefault(folder, set()).add(parts[depth])
                break
    return found


def _as_operator(argv: list[str], hold: Path, home: Path) -> list[str]:
    """``argv`` as OPERATOR (no capability, no supplementary group) in a private mount namespace
    where it passes to the interpreter, our package, the snoop agent and its own ``home``."""
    needed = [os.path.realpath(sys.base_prefix), sys.prefix, str(PACKAGE_ROOT), str(SNOOP), str(home)]
    lines = ["set -e", "mount --make-rprivate /"]
    for number, (folder, children) in enumerate(sorted(_blocked(needed).items())):
        keep = hold / str(number)
        keep.mkdir(parents=True, exist_ok=True)
        lines += [f"mount --bind {shlex.quote(folder)} {shlex.quote(str(keep))}",
                  f"mount -t tmpfs -o mode=0755 agentmeter-test {shlex.quote(folder)}"]
        for child in sorted(children):
            inside = shlex.quote(os.path.join(folder, child))
            lines += [f"mkdir {inside}", f"mount --rbind {shlex.quote(str(keep / child))} {inside}"]
    lines.append(f'exec setpriv --reuid={OPERATOR} --regid={OPERATOR} --clear-groups -- "$@"')
    return ["unshare", "--mount", "--", "sh", "-c", "\n".join(lines), "sh", *argv]


def _operator_folder() -> Path:
    """The operator's own folder (its store, suite, HOME and TMPDIR), in the shared temp dir:
    pytest's folders are root's, 0700."""
    folder = Path(tempfile.mkdtemp(prefix="agentmeter-operator-"))
    for name in ("home", "tmp"):
        (folder / name).mkdir()
    return folder


def _give(folder: Path) -> None:
    for parent, folders, files in os.walk(folder):
        os.lchown(parent, OPERATOR, OPERATOR)
        for name in files:
            os.lchown(os.path.join(parent, name), OPERATOR, OPERATOR)


def _namespaces_allowed(hold: Path, home: Path) -> bool:
    """Whether bwrap gets a user namespace as a user who is not root, here."""
    probe = subprocess.run(_as_operator(["bwrap", "--unshare-user", "--ro-bind", "/", "/", "true"], hold, home),
                           capture_output=True, text=True, timeout=60, check=False)
    return probe.returncode == 0


def test_the_walls_hold_when_the_runner_is_not_root(tmp_path):
    operator = _operator_folder()
    try:
        db, escape, task = operator / "walls.db", operator / "escaped.txt", operator / "suite" / "task"
        # "@": the paths are not files its command names (those are bound into its view, and
        # readable to an agent of the runner's uid: docs/security.md)
        suite = _suite(operator / "suite", [sys.executable, str(SNOOP), KEY, f"@{db}", f"@{socket_path(db)}",
                                            f"@{escape}", f"@{task}"])
        _give(operator)
        env = {**os.environ, "HOME": str(operator / "home"), "TMPDIR": str(operator / "tmp"),
               "PYTHONDONTWRITEBYTECODE": "1", "OPENAI_API_KEY": KEY, "AGENTMETER_PLANTED": KEY}
        env.pop("AGENTMETER_SANDBOX_ROOT", None)  # the default: the operator's $TMPDIR/agentmeter
        run = [sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db", str(db)]
        if not _namespaces_allowed(tmp_path / "hold", operator):
            _refused(_as_operator(run, tmp_path / "hold", operator), env, db)
            return
        runner = subprocess.Popen(_as_operator(run, tmp_path / "hold", operator), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env, cwd=operator)
        try:
            agents = wait_for(lambda: _agents(f"@{escape}") or runner.poll() is not None,
                              "the trial's agent, waiting for its signal")
            assert agents is not True, runner.communicate()
            (agent,) = agents
            assert agent.uids().real == OPERATOR  # the runner's own uid: no pool without root
            agent.send_signal(signal.SIGUSR1)
            out, err = runner.communicate(timeout=600)
        finally:
            if runner.poll() is None:
                runner.kill()
        assert runner.returncode == 0, out + err
        (found,) = _stdout_findings(db)
        assert found["keys"] == [] and found["others"] == [], found  # pid namespace: no runner, no environ
        assert found["sockets"] == {} and found["store"] == [], found
        assert str(task / "escaped.txt") not in found["escaped"], found  # no task folder in its view
        # The operator's folder, which the agent's uid may write on the host, was not in its view:
        # what it wrote there went to its private /tmp.
        assert not escape.exists() and not (task / "escaped.txt").exists()
        ((trial, lines),) = transcript(db)
        assert trial["status"] == "passed", lines
        assert any(line.startswith("isolation: bwrap") and "not root" in line for line in lines), lines
        assert all(KEY not in line for line in lines)
    finally:
        shutil.rmtree(operator, ignore_errors=True)


def _refused(argv: list[str], env: dict[str, str], db: Path) -> None:
    """The kernel refuses: no trial starts, and the run says why in one line."""
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "cannot wall its trials in" in line]
    assert len(lines) == 1 and 'isolation = "none"' in lines[0], result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert not db.exists() or transcript(db) == []


def test_a_runner_that_is_not_root_leaves_roots_leftovers_alone(tmp_path):
    """A dead root runner's group is root's: an operator's runner cleaning leftovers (as every
    local open does) passes it by instead of failing on its ``cgroup.kill``."""
    from agentmeter_tui.core import cgroups

    found = cgroups.hierarchy()
    assert found is not None, cgroups.describe()
    owner = found.parent / f"999999999-{os.getpid()}"  # no such pid: gone
    group = owner / "leftover"
    group.mkdir(parents=True)
    operator = _operator_folder()
    try:
        code = "from agentmeter_tui.core import cgroups; print(cgroups.clean_leftovers())"
        _give(operator)
        done = subprocess.run(_as_operator([sys.executable, "-c", code], tmp_path / "hold", operator),
                              capture_output=True, text=True, timeout=300, check=False, cwd=operator,
                              env={**os.environ, "HOME": str(operator / "home"), "PYTHONDONTWRITEBYTECODE": "1"})
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    finally:
        shutil.rmtree(operator, ignore_errors=True)
        with contextlib.suppress(OSError):
            group.rmdir()
            owner.rmdir()
