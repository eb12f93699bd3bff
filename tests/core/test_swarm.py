"""The swarm sandbox on a one-node swarm (the CI engine after `docker swarm init`): the smoke
suite runs as swarm jobs with its verifiers as jobs too, a budget kill removes the job, and
no service, config or container of the run is left."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.sandbox_support import (
    RUNAWAY,
    SMOKE,
    assert_runaways_killed,
    assert_smoke_verdicts,
    leftovers,
    suite_copy,
    swarm_fixture,  # noqa: F401 - the swarm fixture
    unique_id,
)

pytestmark = pytest.mark.docker


def test_smoke_suite_runs_as_swarm_jobs(tmp_path, db, swarm):
    suite_id = unique_id("swarm-smoke")
    suite = suite_copy(SMOKE, tmp_path / "suite", 'kind = "swarm"\ncpus = 0.5\nmemory = "256m"', suite_id=suite_id,
                       replace={"trials = 2": "trials = 1"})
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    trials = Store(db).trials(suite_id)
    assert len(trials) == 4
    # The workspace and the reward the tests wrote came back from the verifier's own job.
    assert_smoke_verdicts(trials, "swarm")
    assert leftovers(swarm, suite_id, db) == {}


def test_a_budget_kill_removes_the_job(tmp_path, db, swarm):
    suite_id = unique_id("swarm-runaway")
    # A swarm job's clock starts when it is submitted: scheduling and the start of a half-core
    # container count against it, so the burner gets room to meet its token budget first.
    suite = suite_copy(RUNAWAY, tmp_path / "suite", 'kind = "swarm"\ncpus = 0.5\nmemory = "256m"',
                       suite_id=suite_id, replace={"wall_seconds = 20": "wall_seconds = 90"})
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=900)
    assert result.returncode == 0, result.stderr + result.stdout
    # Removing the service stops its container wherever it runs; on this node SIGINT goes first.
    assert_runaways_killed(Store(db), suite_id)
    assert leftovers(swarm, suite_id, db) == {}


async def test_closing_the_sandbox_sweeps_what_a_lost_engine_kept(tmp_path, swarm):
    """A trial removes its own service, but not while the manager does not answer: what is
    left of this runner's run then (a service, its config) goes when the sandbox closes; what
    another suite or runner made stays."""
    from agentmeter_tui.core.sandboxes.docker.engine import runner_label, trial_labels
    from agentmeter_tui.core.sandboxes.docker.images import ensure_host_image
    from agentmeter_tui.core.sandboxes.docker.swarm import SwarmSandbox
    from agentmeter_tui.core.suites.load import load_suite

    suite_id = unique_id("swarm-sweep")
    suite = load_suite(suite_copy(SMOKE, tmp_path / "suite", 'kind = "swarm"', suite_id=suite_id))
    image = ensure_host_image(swarm)
    ours = trial_labels(suite_id, 1, "sweeptoken0001")
    theirs = {**ours, "agentmeter.runner": f"{runner_label()}-another"}
    made = []
    for name, labels in (("ours", ours), ("theirs", theirs)):
        config = swarm.configs.create(name=f"{suite_id}-{name}", data=b"x", labels=labels)
        service = swarm.services.create(image, ["sleep", "300"], name=f"{suite_id}-{name}", labels=labels,
                                        container_labels=labels)
        made.append((name, config, service))
    sandbox = SwarmSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    try:
        await sandbox.connect()
    finally:
        await sandbox.close()
    try:
        services = {s["Spec"]["Name"] for s in swarm.api.services(filters={"label": f"agentmeter.suite={suite_id}"})}
        configs = {c["Spec"]["Name"] for c in swarm.api.configs(filters={"label": f"agentmeter.suite={suite_id}"})}
        assert services == {f"{suite_id}-theirs"} and configs == {f"{suite_id}-theirs"}
    finally:
        from docker.errors import NotFound

        for _, config, service in made:
            for thing in (service, config):
                try:
                    thing.remove()
                except NotFound:  # swept
                    pass
