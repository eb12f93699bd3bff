"""Harbor-format trials on every node of a 3-node fleet (scripts/fleet.sh, docs/fleet.md): each
trial's container is driven through the engine of the node Swarm placed it on (the sandbox's
``node_engines``), so the fixture's Harbor tasks (each with its own Dockerfile, built once and
pushed) spread over the nodes with the docker sandbox's verdicts, and a worker killed mid-run
costs nothing: its attempts end infra-invalid ("lost") and rerun on the others."""

from __future__ import annotations

from collections import Counter

import pytest

from agentmeter_tui.core.paths import runner_log_path
from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.fleet_support import fleet_down, fleet_harbor_suite, fleet_leftovers, fleet_up, lose_a_worker, slow_solutions
from tests.core.harbor_support import harbor_suite
from tests.waiting import wait_for

# One worker runs the file (its tests share the module's fleet); a few minutes in all.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.xdist_group("fleet-harbor")]

FLEET_ENV = {"FLEET_NAME": "amh", "FLEET_NET": "10.213.93", "FLEET_DIR": "/tmp/agentmeter-fleet-harbor"}
# The oracle suite's tasks with a solution: their trials may go to any node (greet says
# allow_internet = false: on the walled network every node's wall closes it in).
OPEN = {"count", "probe"}
ANY_NODE = {*OPEN, "greet"}


@pytest.fixture(scope="module")
def fleet():
    fleet = fleet_up(3, **FLEET_ENV)
    yield fleet
    fleet_down(fleet)


def verdicts(trials: list[dict]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for trial in trials:
        found.setdefault(trial["task_id"], set()).add(trial["status"])
    return found


def test_harbor_trials_spread_over_the_nodes_with_the_docker_sandboxs_verdicts(tmp_path, db, fleet):
    docker, docker_id = harbor_suite(tmp_path / "docker", "oracle")
    result = agentmeter("run", str(docker), "--headless", "--db", str(tmp_path / "docker.db"), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    expected = verdicts(Store(tmp_path / "docker.db").trials(docker_id))
    assert expected == {"count": {"passed"}, "greet": {"passed"}, "probe": {"passed"}, "no-solution": {"failed"}}

    suite, suite_id = fleet_harbor_suite(tmp_path / "fleet", fleet,
                                  {"trials = 1": "trials = 3", "concurrency = 2": "concurrency = 6"})
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    trials = Store(db).trials(suite_id)
    assert len(trials) == 12 and verdicts(trials) == expected, trials
    used = {t["node"] for t in trials if t["task_id"] != "no-solution"}  # refused before any container
    workers = {fleet.node(2), fleet.node(3)}
    assert len(used) >= 2 and used <= {fleet.node(i) for i in (1, 2, 3)}, used
    # Harbor trials ran on workers: the agent, /logs and the verifier through that node's engine.
    assert {t["node"] for t in trials if t["task_id"] in ANY_NODE} & workers, trials
    log = runner_log_path(db).read_text()
    for task in ("count", "greet", "probe"):  # built once on the manager, pushed once
        assert log.count(f"image agentmeter-task/{task}:") == 2, log
    wait_for(lambda: fleet_leftovers(fleet, suite_id) == {}, "no leftovers of the run on any node")


# A worker lost: its engine and containers killed (`up` restarts it). A cut link (`cut`/`mend`,
# the engine still answering) ended 4 cells infra-invalid "no result" in one CI run of two: not
# in this test until that is understood (the closing note of issue 34 says so).
@pytest.mark.parametrize(("loss", "back"), [("kill", "up")])
def test_a_worker_lost_under_harbor_trials_costs_nothing(tmp_path, db, fleet, loss, back):
    suite, suite_id = fleet_harbor_suite(tmp_path, fleet, {
        "trials = 1": 'trials = 3\ntasks = ["count", "probe"]', "concurrency = 2": "concurrency = 6"})
    slow_solutions(suite, OPEN, 8)  # long enough that the kill lands mid-trial
    victim, trials, lost = lose_a_worker(fleet, db, suite, suite_id, loss)
    # Every planned trial ended once, with the docker sandbox's verdict; lost attempts reran elsewhere.
    final = [t for t in trials if t["status"] != "infra-invalid"]
    assert Counter((t["task_id"], t["trial_index"]) for t in final) == {(k, i): 1 for k in OPEN for i in range(1, 4)}
    assert {t["status"] for t in final} == {"passed"}, final
    assert all(t["node"] != victim for t in final if t["id"] > lost[-1]["id"]), trials
    # Back, the node drops the container of the removed service; nothing is left anywhere.
    fleet.run(back, victim.rpartition("-n")[2])
    wait_for(lambda: fleet_leftovers(fleet, suite_id) == {}, "no leftovers of the run on any node")
