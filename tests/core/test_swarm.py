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
