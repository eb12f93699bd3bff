"""The metering proxy from inside sandboxes: agents in docker containers on the isolated
network (whose only reachable address is this machine's relay to the proxy) and agents on
ssh hosts (through a reverse tunnel to the proxy) are metered by it, call for call.

The scripted server knows no key the agent holds (each trial's session key lives only in the
proxy), so a trial that passes reached its model through the proxy and nowhere else."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES, TokenUsage
from tests.conftest import need
from tests.core.sandbox_support import SMOKE, docker_engine, leftovers, suite_copy, unique_id  # noqa: F401
from tests.core.sshd_support import SshdInstance, keygen, sshd_available

PROXIED = {"[suite]\n": "[suite]\nproxy = true\n", "trials = 2": "trials = 1"}


def assert_metered_by_the_proxy(trials: list[dict]) -> None:
    assert len(trials) == 4
    for trial in trials:
        assert trial["status"] == ("passed" if trial["model"] == "solver" else "failed"), trial
        assert trial["usage_source"] == "proxy"
        extra = json.loads(trial["extra"])
        served = TokenUsage.from_dict(extra["scripted"]["usage"])
        assert TokenUsage(*(trial[c] for c in TOKEN_CLASSES)) == served and served.raw > 0
        assert extra["proxy"]["calls"] == extra["scripted"]["calls"]


@pytest.mark.docker
def test_containers_on_the_isolated_network_reach_only_the_proxy(tmp_path, db, docker_engine):
    suite_id = unique_id("proxy-docker")
    suite = suite_copy(SMOKE, tmp_path / "suite", 'kind = "docker"\nnetwork = "isolated"', suite_id=suite_id,
                       replace=PROXIED)
    result = subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db",
                             str(db)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    assert_metered_by_the_proxy(Store(db).trials(suite_id))
    assert leftovers(docker_engine, suite_id) == {}


@pytest.mark.ssh
def test_ssh_hosts_reach_the_proxy_through_a_reverse_tunnel(tmp_path, db):
    need(sshd_available(), "sshd and ssh-keygen are needed, as root")
    key = keygen(tmp_path / "client_ed25519")
    host = SshdInstance(tmp_path / "a", client_key=key).start()
    try:
        known = tmp_path / "known_hosts"
        host.trust(known)
        suite_id = unique_id("proxy-ssh")
        sandbox = 'kind = "ssh"\nprobe_interval = 0.5\n\n' + host.host_toml("a", 2, known)
        suite = suite_copy(SMOKE, tmp_path / "suite", sandbox, suite_id=suite_id, replace=PROXIED)
        result = subprocess.run([sys.executable, "-m", "agentmeter_tui.core.run.runner", "--suite", str(suite),
                                 "--db", str(db)], capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stderr
        trials = Store(db).trials(suite_id)
        assert_metered_by_the_proxy(trials)
        assert {t["sandbox"] for t in trials} == {"ssh"}
    finally:
        host.stop()
