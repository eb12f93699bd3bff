"""Attack: a docker runner killed with kill -9 mid-run (issue 23 item 7). Its trial in flight
and its warm containers used to outlive the next run of the same store; they, and the trial
folders (bind mode's host roots) of the dead runner, must be gone once the next run finishes."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import pytest

from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.sandbox_support import (  # noqa: F401 - docker_engine_fixture is a fixture
    RUNAWAY,
    docker_engine_fixture,
    leftovers,
    suite_copy,
    unique_id,
)
from tests.waiting import pid_running, wait_for

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("workspace", ["copy", "bind"])
def test_the_next_run_removes_a_killed_runners_containers_and_folders(tmp_path, db, docker_engine, workspace):
    suite_id = unique_id(f"killed-runner-{workspace}")
    # The sleeper stays in flight until the runner dies; two warm containers wait beside it
    # (copy mode).
    suite = suite_copy(RUNAWAY, tmp_path / "suite", f'kind = "docker"\nworkspace = "{workspace}"\nwarm = 2',
                       suite_id=suite_id, replace={"wall_seconds = 20": "wall_seconds = 3600",
                                                   "[suite]\n": "[suite]\nmax_retries = 0\n"})
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    store = Store(db)
    wait_for(lambda: len(store.trials(suite_id, "status = 'running' or finished_at is not null")) == 3,
             "all three trials started")
    sleeper = wait_for(lambda: store.trials(suite_id, "model = 'sleeper' and status = 'running'"), "the sleeper")[0]
    runner = next(store.db.query("select pid from runs"))["pid"]
    # bind mode's host folders, named with the runner: seen while it lives, since once it is
    # dead any docker run's preflight on this machine (another test's, in parallel) removes them
    folders = list((Path(tempfile.gettempdir()) / "agentmeter-docker").glob(f"t*-r{runner}-*"))
    assert bool(folders) == (workspace == "bind"), folders
    os.kill(runner, signal.SIGKILL)
    wait_for(lambda: not pid_running(runner), "the runner's death")
    assert leftovers(docker_engine, suite_id), "the killed runner left nothing: the attack did not happen"

    # The next run reruns the interrupted sleeper: once it runs, the next run has started (its
    # sandbox's preflight is done), and nothing of the dead runner may be left.
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    wait_for(lambda: store.trials(suite_id, f"model = 'sleeper' and status = 'running' and id != {sleeper['id']}"),
             "the rerun sleeper")
    row = store.trial(sleeper["id"])
    assert (row["status"], row["reason"]) == ("infra-invalid", "infra: interrupted: runner lost (restarted)")
    assert of_runner(docker_engine, suite_id, runner) == []
    assert [f for f in folders if f.exists()] == []
    agentmeter("stop", "--db", str(db), check=True)
    assert leftovers(docker_engine, suite_id, db) == {}


def of_runner(client, suite_id: str, pid: int) -> list[str]:
    """The suite's containers and volumes made by the runner with ``pid`` on this machine."""
    selector = {"label": f"agentmeter.suite={suite_id}"}
    objects = [(c["Names"][0], c["Labels"]) for c in client.api.containers(all=True, filters=selector)]
    objects += [(v["Name"], v["Labels"] or {}) for v in client.api.volumes(filters=selector).get("Volumes") or []]
    return [name for name, labels in objects if labels.get("agentmeter.runner", "").split(":")[1:2] == [str(pid)]]
