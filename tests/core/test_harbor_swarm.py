"""Harbor-format tasks in the swarm sandbox (the CI engine is a one-node swarm): each trial is
a service running the task's image (built locally, FROM busybox-static + bash of this
machine), the agent and Harbor's verifier exec'd into its one container; and a Harbor trial
killed by its budget (docker and swarm) ends ``killed``, unverified, with nothing left."""

from __future__ import annotations

import inspect

import pytest

from agentmeter_tui.core.sandboxes.docker.nodewall import ADDRESS as WALL_ADDRESS
from agentmeter_tui.core.sandboxes.docker.nodewall import WALLED_NETWORK
from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.harbor_support import assert_agent_verdicts, events_text, harbor_suite, run
from tests.core.sandbox_support import docker_engine_fixture, leftovers, swarm_client, swarm_fixture  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


def swarm_suite(tmp_path, name):
    suite, suite_id = harbor_suite(tmp_path, name)
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text().replace('kind = "docker"', 'kind = "swarm"'))
    return suite, suite_id


def test_reference_agent_on_harbor_tasks_in_swarm(tmp_path, db, swarm):
    suite, suite_id = swarm_suite(tmp_path, "agents")
    trials = run(suite, db)
    assert_agent_verdicts(trials, db, tmp_path, "swarm")
    assert leftovers(swarm, suite_id, db) == {}


def test_oracle_and_broken_tasks_in_swarm(tmp_path, db, swarm):
    suite, suite_id = swarm_suite(tmp_path, "oracle")
    trials = run(suite, db)
    assert {k[0]: t["status"] for k, t in trials.items()} == {"count": "passed", "greet": "passed",
                                                              "probe": "passed", "no-solution": "failed"}
    assert "has no solution/solve.sh" in trials[("no-solution", "oracle")]["reason"]
    # A Dockerfile that fails and a test.sh that hangs: named, and the run goes on.
    broken, broken_id = swarm_suite(tmp_path / "b", "broken")
    result = agentmeter("run", str(broken), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 8, result.stderr + result.stdout  # the run went on; bad-docker's cell has no result
    found = {t["task_id"]: t for t in Store(db).trials(broken_id)}
    assert found["bad-docker"]["status"] == "infra-invalid", found["bad-docker"]
    assert "bad-docker/environment/Dockerfile:3" in found["bad-docker"]["reason"]
    assert found["hang"]["status"] == "failed" and "timeout_sec = 2 s" in found["hang"]["reason"], found["hang"]
    assert found["ok"]["status"] == "passed"
    assert leftovers(swarm, suite_id, db) == {} and leftovers(swarm, broken_id, db) == {}


async def test_a_harbor_service_has_the_task_limits_and_says_what_it_cannot_apply(tmp_path, swarm):
    from agentmeter_tui.core.sandboxes.docker.swarm import SwarmSandbox
    from agentmeter_tui.core.suites.load import load_suite

    suite_dir, suite_id = swarm_suite(tmp_path, "agents")
    suite = load_suite(suite_dir)
    sandbox = SwarmSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    try:
        await sandbox.preflight()
        session = await sandbox.open(suite.task("greet"), 1, "swarmharbor0001")
        try:
            (service,) = swarm.api.services(filters={"label": f"agentmeter.suite={suite_id}"})
            spec = service["Spec"]["TaskTemplate"]
            container = swarm.api.inspect_container(session.container)
            notes = list(session.notes)
            url = session.translate_url("http://127.0.0.1:40009/v1")  # the wall relays an unprivileged port
            url = await url if inspect.isawaitable(url) else url  # the walled relay is made on first use
        finally:
            await session.cleanup()
    finally:
        await sandbox.close()
    # greet's [environment] cpus = 1 and memory_mb = 512 are the service's limits; pids the suite's.
    assert spec["Resources"]["Limits"] == {"NanoCPUs": 1_000_000_000, "MemoryBytes": 512 * 1024 * 1024,
                                           "Pids": 1024}
    # Every capability dropped but the five root needs on the trial's own files and processes.
    assert (spec["ContainerSpec"]["CapabilityDrop"], sorted(spec["ContainerSpec"]["CapabilityAdd"])) == \
        (["ALL"], ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL"])
    assert (spec["ContainerSpec"]["Dir"], container["Config"]["WorkingDir"]) == ("/app", "/app")
    assert container["HostConfig"]["ReadonlyRootfs"] is False
    node = swarm.info()["Swarm"]["NodeID"]
    assert spec["Placement"]["Constraints"] == [f"node.id=={node}"]  # execs reach this node's containers
    # greet's allow_internet = false on the suite's default network: the container is on the
    # walled swarm-scope bridge alone (as any trial, on any node), and the model's loopback URL
    # becomes its node's wall relay (tests/adversarial/test_docker_network_walls.py: nothing else).
    networks = container["NetworkSettings"]["Networks"]
    assert sorted(networks) == [WALLED_NETWORK], networks
    walled = swarm.api.inspect_network(WALLED_NETWORK)
    assert (walled["Internal"], walled["Scope"], walled["Driver"]) == (True, "swarm", "bridge")
    assert url.startswith(f"http://{WALL_ADDRESS}:") and url.endswith("/v1"), url
    assert not any("allow_internet" in n for n in notes), notes
    # storage_mb only on overlay2 over xfs: said in the trial's transcript, never silently dropped.
    driver = swarm.info()
    backing = dict(driver.get("DriverStatus") or []).get("Backing Filesystem")
    assert any("storage_mb = 1024 is not enforced" in n for n in notes) == \
        (driver["Driver"] != "overlay2" or backing != "xfs"), notes
    assert leftovers(swarm, suite_id) == {}


@pytest.mark.parametrize("kind", ["docker", "swarm"])
def test_a_budget_killed_harbor_trial_is_not_verified(tmp_path, db, docker_engine, kind):
    if kind == "swarm":
        swarm_client()
    suite, suite_id = harbor_suite(tmp_path, "killed")
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text().replace('kind = "docker"', f'kind = "{kind}"'))
    trials = run(suite, db)
    trial = trials[("spin", "burner")]
    assert (trial["status"], trial["reason"]) == ("killed", "budget:tokens"), trial
    assert trial["sandbox"] == kind and trial["workspace"] == "/app"
    # Never verified: no verifier output, no reward (its test.sh would have written 1).
    assert trial["verifier_output"] is None and trial["verifier_exit"] is None and not trial["passed"], trial
    text = events_text(db, trial["id"])
    assert "started in /app" in text and "the verifier ran" not in text and "verifying" not in text
    # The container (or service) and the setsid sleep the agent left behind are gone.
    assert leftovers(docker_engine, suite_id, db) == {}


def test_a_harbor_suite_in_swarm_needs_the_runtime_bundle(tmp_path, db, swarm):
    """A CLI installed without its runtime bundle (install-clis predates it) cannot start in a
    task's image: the run stops before any trial, saying what to run."""
    from agentmeter_tui.core.harnesses import ADAPTERS

    clis = tmp_path / "clis"
    launcher = clis / ADAPTERS.get("claude-code")().executable(str(clis))[len(str(clis)) + 1:]
    launcher.parent.mkdir(parents=True)
    launcher.write_text("")
    suite, suite_id = swarm_suite(tmp_path, "agents")
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text().replace('adapter = "reference"', 'adapter = "claude-code"'))
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=300,
                        env={"AGENTMETER_CLIS_DIR": str(clis)})
    assert result.returncode != 0
    assert f"claude-code: no runtime bundle under {clis}" in result.stderr and "agentmeter install-clis" in result.stderr
    assert Store(db).trials(suite_id) == [] and leftovers(swarm, suite_id, db) == {}
