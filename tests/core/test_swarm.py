"""The swarm sandbox on a one-node swarm (the CI engine after `docker swarm init`): the smoke
suite runs as swarm jobs with its verifiers as jobs too, a budget kill removes the job, and
no service, config or container of the run is left."""

from __future__ import annotations

from datetime import datetime

import pytest

from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.sandbox_support import RUNAWAY, SMOKE, leftovers, suite_copy, swarm_client, unique_id

pytestmark = pytest.mark.docker
RAW = ("uncached_input", "cached_input", "cache_write", "output", "reasoning")


@pytest.fixture
def swarm():
    client = swarm_client()
    yield client
    client.close()


def test_smoke_suite_runs_as_swarm_jobs(tmp_path, db, swarm):
    suite_id = unique_id("swarm-smoke")
    suite = suite_copy(SMOKE, tmp_path / "suite", 'kind = "swarm"\ncpus = 0.5\nmemory = "256m"', suite_id=suite_id,
                       replace={"trials = 2": "trials = 1"})
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    trials = Store(db).trials(suite_id)
    assert len(trials) == 4
    for trial in trials:
        assert trial["sandbox"] == "swarm", trial
        assert trial["status"] == ("passed" if trial["model"] == "solver" else "failed"), trial
    solved = {t["task_id"]: t["verifier_output"] for t in trials if t["model"] == "solver"}
    assert "count is right: 7" in solved["count-lines"]  # the workspace came back from the job
    # The partial reward the tests wrote inside the verifier's job came back too.
    assert all(t["quality"] == 0.5 for t in trials if t["model"] == "fumbler" and t["task_id"] == "count-lines")
    assert leftovers(swarm, suite_id, db) == {}


def test_a_budget_kill_removes_the_job(tmp_path, db, swarm):
    suite_id = unique_id("swarm-runaway")
    suite = suite_copy(RUNAWAY, tmp_path / "suite", 'kind = "swarm"\ncpus = 0.5\nmemory = "256m"',
                       suite_id=suite_id)
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    store = Store(db)
    trials = {t["model"]: t for t in store.trials(suite_id)}
    burner = trials["burner"]
    assert burner["status"] == "killed" and burner["reason"] == "budget:tokens", burner
    assert sum(burner[c] for c in RAW) >= 20000
    assert trials["sleeper"]["status"] == "killed" and trials["sleeper"]["reason"] == "budget:time"
    total, crossed_at = 0, None
    for seq, ts, kind, *_ in store.events(burner["id"]):
        if kind == "usage":
            row = next(store.db.query("select * from usage where trial_id = ? and seq = ?", [burner["id"], seq]))
            total += sum(row[c] for c in RAW)
            if total >= 20000 and crossed_at is None:
                crossed_at = ts
    # Removing the service stops its container (SIGINT, SIGKILL after stop_grace): no 10 s wait.
    assert datetime.fromisoformat(burner["finished_at"]).timestamp() - crossed_at < 5.0
    assert leftovers(swarm, suite_id, db) == {}
