"""Harbor-format task folders (Terminal-Bench 2 / Harbor templates) run unchanged in the docker
sandbox: images built locally from each task's environment/Dockerfile ``FROM`` busybox-static +
bash + python3 of this machine (no registry), the reference agent driven by scripted scenarios,
and Harbor's verifier judging by reward file, never by exit code (tests/fixtures/harbor)."""

from __future__ import annotations

import re

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES
from tests.conftest import agentmeter
from tests.core.harbor_support import assert_agent_verdicts, events_text, harbor_suite, run
from tests.core.sandbox_support import docker_engine_fixture, leftovers  # noqa: F401 - a fixture
from tests.core.test_sandbox_docker_ssh import remote_engine_toml, sshd  # noqa: F401 - sshd is a fixture

pytestmark = pytest.mark.docker


def test_reference_agent_on_harbor_tasks(tmp_path, db, docker_engine):
    suite, suite_id = harbor_suite(tmp_path, "agents")
    trials = run(suite, db)
    assert_agent_verdicts(trials, db, tmp_path, "docker")
    # greet's storage_mb = 1024: applied only on overlay2 over xfs; elsewhere the transcript says so.
    info = docker_engine.info()
    unenforceable = info["Driver"] != "overlay2" or dict(info["DriverStatus"]).get("Backing Filesystem") != "xfs"
    assert ("storage_mb = 1024 is not enforced" in events_text(db, trials[("greet", "solver")]["id"])) == unenforceable
    assert leftovers(docker_engine, suite_id, db) == {}


def test_oracle_passes_every_task_and_fails_one_without_a_solution(tmp_path, db, docker_engine):
    suite, suite_id = harbor_suite(tmp_path, "oracle")
    trials = run(suite, db)
    assert set(trials) == {("count", "oracle"), ("greet", "oracle"), ("probe", "oracle"), ("no-solution", "oracle")}
    for task in ("count", "greet", "probe"):
        trial = trials[(task, "oracle")]
        assert (trial["status"], trial["quality"]) == ("passed", 1.0), trial
        assert sum(trial[c] for c in TOKEN_CLASSES) == 0  # no model: zero tokens, zero cost
        assert trial["cost_usd"] in (0, 0.0, None)
    missing = trials[("no-solution", "oracle")]
    assert missing["status"] == "failed" and "has no solution/solve.sh" in missing["reason"], missing
    assert leftovers(docker_engine, suite_id, db) == {}


def test_broken_tasks_are_named_and_the_run_goes_on(tmp_path, db, docker_engine):
    suite, suite_id = harbor_suite(tmp_path, "broken")
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 8, result.stderr + result.stdout  # the run went on; bad-docker's cell has no result
    # A task.toml that does not parse: skipped, named with its file and line; never in the store.
    assert re.search(r"task skipped: \S*bad-toml/task\.toml:4: invalid TOML", result.stderr), result.stderr
    trials = {t["task_id"]: t for t in Store(db).trials(suite_id)}
    assert set(trials) == {"bad-docker", "hang", "ok"}
    # A Dockerfile whose RUN fails: that task's trial is infra-invalid, naming the file and line.
    image = trials["bad-docker"]
    assert image["status"] == "infra-invalid" and "bad-docker/environment/Dockerfile:3" in image["reason"], image
    # A test.sh that hangs: killed at [verifier] timeout_sec, the trial failed with that reason.
    hang = trials["hang"]
    assert hang["status"] == "failed" and "timeout_sec = 2 s" in hang["reason"], hang
    assert "about to hang" in hang["verifier_output"]
    assert trials["ok"]["status"] == "passed"
    assert all(t["finished_at"] for t in trials.values())  # every trial has its final row
    assert leftovers(docker_engine, suite_id, db) == {}


async def test_no_internet_narrows_a_suite_network_that_has_a_route_out(tmp_path, docker_engine):
    from agentmeter_tui.core.sandboxes.docker.sandbox import DockerSandbox
    from agentmeter_tui.core.suites.load import load_suite

    suite_dir, _ = harbor_suite(tmp_path, "agents")
    toml = suite_dir / "suite.toml"
    toml.write_text(toml.read_text().replace('kind = "docker"', 'kind = "docker"\nnetwork = "bridge"\nwarm = 0'))
    suite = load_suite(suite_dir)
    sandbox = DockerSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    networks = {}
    try:
        await sandbox.preflight()
        for index, task_id in enumerate(("greet", "count"), start=1):  # allow_internet = false / Harbor's default
            session = await sandbox.open(suite.task(task_id), index, f"nettoken{index:08d}")
            try:
                attrs = docker_engine.api.inspect_container(session.container)
                networks[task_id] = sorted(attrs["NetworkSettings"]["Networks"])
                networks[task_id + " limits"] = (attrs["HostConfig"]["NanoCpus"], attrs["HostConfig"]["Memory"])
                if task_id == "greet":
                    networks["greet url"] = await session.translate_url("http://127.0.0.1:9/v1")
            finally:
                await session.cleanup()
    finally:
        await sandbox.close()
    assert networks["greet"] == ["agentmeter-walled"] and networks["count"] == ["bridge"]
    # greet's [environment] cpus = 1 and memory_mb = 512 are the container's limits.
    assert networks["greet limits"] == (1_000_000_000, 512 * 1024 * 1024)
    isolated = docker_engine.networks.get("agentmeter-walled").attrs["IPAM"]["Config"][0]["Gateway"]
    assert networks["greet url"].startswith(f"http://{isolated}:")  # the relay on the isolated network


@pytest.mark.ssh
def test_oracle_on_a_remote_engine_over_ssh(tmp_path, db, docker_engine, sshd):  # noqa: F811 - a fixture
    """The same code path on a remote engine (``ssh://``, the loopback sshd standing in): the
    task images are built there, the contract and the verifier hold."""
    suite, suite_id = harbor_suite(tmp_path, "oracle")
    toml = suite / "suite.toml"
    text = toml.read_text().replace('kind = "docker"', remote_engine_toml(sshd, sshd.trust()))
    toml.write_text(text.replace('tasks_dir = "../tasks"', 'tasks_dir = "../tasks"\ninclude = ["probe", "count", "greet"]'))
    trials = run(suite, db)
    assert {k: t["status"] for k, t in trials.items()} == {("count", "oracle"): "passed", ("probe", "oracle"): "passed",
                                                           ("greet", "oracle"): "passed"}
    assert all(t["host"] == f"ssh://root@127.0.0.1:{sshd.port}" for t in trials.values())
    # greet's allow_internet = false cannot close a remote engine's host network: said, not silent.
    said = "allow_internet = false is not enforced on a remote engine"
    assert said in events_text(db, trials[("greet", "oracle")]["id"])
    assert said not in events_text(db, trials[("count", "oracle")]["id"])
    assert leftovers(docker_engine, suite_id, db) == {}


async def test_the_suite_threshold_decides_the_pass(tmp_path, docker_engine):
    """An off-by-one count earns reward 0.5: failed under the default threshold 1.0, passed under
    ``pass_threshold = 0.5``; the quality is 0.5 either way (the real verifier in a real container)."""
    from agentmeter_tui.core.sandboxes.base import LaunchSpec
    from agentmeter_tui.core.sandboxes.docker.sandbox import DockerSandbox
    from agentmeter_tui.core.suites.load import load_suite
    from agentmeter_tui.core.harbor.verifier import HarborVerifier

    suite_dir, _ = harbor_suite(tmp_path, "agents")
    suite = load_suite(suite_dir)
    sandbox = DockerSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    verdicts = {}
    try:
        for index, threshold in enumerate((1.0, 0.5), start=1):
            session = await sandbox.open(suite.task("count"), index, f"threshold{index:07d}")
            try:
                agent = await session.start(LaunchSpec(["sh", "-c", "wc -l < data.csv > count.txt"], {}),
                                            lambda stream, batch: None)
                assert await agent.wait() == 0
                verdicts[threshold] = await HarborVerifier(suite.task("count"), pass_threshold=threshold).verify(session)
            finally:
                await session.cleanup()
    finally:
        await sandbox.close()
    assert (verdicts[1.0].passed, verdicts[1.0].quality, verdicts[1.0].reason) == (False, 0.5, "reward 0.5 < threshold 1")
    assert (verdicts[0.5].passed, verdicts[0.5].quality, verdicts[0.5].reason) == (True, 0.5, None)
