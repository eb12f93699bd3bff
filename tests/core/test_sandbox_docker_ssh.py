"""Docker on a remote engine through the SDK's ``ssh://`` base URL, with the suite's own key and
known_hosts (the loopback sshd stands in for the remote host): one trial runs, its model is
reached through a reverse tunnel, and an unknown host key is refused."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.sandboxes.docker.engine import EngineError
from agentmeter_tui.core.sandboxes.docker.sandbox import DockerSandbox
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.load import load_suite
from tests.conftest import agentmeter, need
from tests.core.sandbox_support import (  # noqa: F401
    SMOKE,
    docker_engine_fixture,
    leftovers,
    single_trial,
    suite_copy,
    unique_id,
)
from tests.core.sshd_support import SshdInstance, sshd_available

pytestmark = [pytest.mark.docker, pytest.mark.ssh]


@pytest.fixture
def sshd(tmp_path):
    need(sshd_available(), "sshd and ssh-keygen are needed, as root")
    instance = SshdInstance(tmp_path / "sshd").start()
    yield instance
    instance.stop()


def remote_engine_toml(sshd: SshdInstance, known_hosts) -> str:
    return (f'kind = "docker"\nengine = "ssh://root@127.0.0.1:{sshd.port}"\nkey = "{sshd.client_key}"\n'
            f'known_hosts = "{known_hosts}"\nslots = 1\nnetwork = "host"\nclis = "image"\n')


def test_one_trial_on_a_remote_engine_over_ssh(tmp_path, db, docker_engine, sshd):
    suite_id = unique_id("docker-ssh")
    suite = single_trial(suite_copy(SMOKE, tmp_path / "suite", remote_engine_toml(sshd, sshd.trust()),
                                    suite_id=suite_id))
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    (trial,) = Store(db).trials(suite_id)
    assert trial["status"] == "passed", trial
    assert trial["sandbox"] == "docker" and trial["host"] == f"ssh://root@127.0.0.1:{sshd.port}"
    assert "count is right: 7" in trial["verifier_output"]
    assert leftovers(docker_engine, suite_id, db) == {}


async def test_an_unknown_host_key_of_a_remote_engine_is_refused(tmp_path, docker_engine, sshd):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    suite = load_suite(suite_copy(SMOKE, tmp_path / "suite", remote_engine_toml(sshd, empty)))
    sandbox = DockerSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    with pytest.raises(EngineError, match="not in known_hosts.*agentmeter hosts accept"):
        await sandbox.preflight()
    await sandbox.close()
