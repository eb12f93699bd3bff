"""Attack: the daemon of ``agents/daemon.py`` on an ssh host (the sshd on 127.0.0.1, root, with
cgroup v2: the remote side joins a cgroup per trial). It must be gone after a normal exit and
after a ``budget:time`` kill, with nothing of the trial left on the host."""

from __future__ import annotations

import pytest

from agentmeter_tui.core import cgroups
from agentmeter_tui.core.store import Store
from tests.adversarial.support import daemon_suite, kill_daemon, leftovers
from tests.conftest import agentmeter, need
from tests.core.sshd_support import SshdInstance, sshd_available

pytestmark = pytest.mark.ssh


@pytest.fixture
def sshd(tmp_path):
    need(sshd_available(), "sshd and ssh-keygen are needed, as root")
    instance = SshdInstance(tmp_path / "host").start()
    yield instance
    instance.stop()


@pytest.mark.parametrize("then", ["exit", "stay"])
def test_daemon_on_an_ssh_host_is_gone_after_its_trial(tmp_path, db, sshd, then):
    pidfile = tmp_path / "daemon.pid"
    try:
        suite = daemon_suite(tmp_path / "suite", pidfile, then, wall_seconds=3 if then == "stay" else 0,
                             sandbox="\n[sandbox]\n" + sshd.sandbox_toml(slots=1))
        result = agentmeter("run", str(suite), "--headless", "--db", str(db))
        assert result.returncode == 0, result.stderr
        [trial] = Store(db).trials("daemon")
        expected = ("passed", None) if then == "exit" else ("killed", "budget:time")
        assert (trial["status"], trial["reason"]) == expected, trial
        notes = [text for *_, stream, text, _data in Store(db).events(trial["id"]) if stream == "runner"]
        assert "processes: cgroup v2 group per trial on host loopback" in notes, notes
        assert leftovers(pidfile, {trial["proc_token"]}, []) == []
        assert list(sshd.work_root.iterdir()) == []  # the trial folder on the host
        groups = [h.parent / "ssh" / trial["proc_token"] for h in cgroups._candidates()]
        assert [g for g in groups if g.exists()] == []  # the host's cgroup of the trial
    finally:
        kill_daemon(pidfile)
