"""The swarm sandbox on a real fleet: three Docker engines in their own network namespaces on
this machine, one Swarm, a local registry (scripts/fleet.sh, docs/fleet.md). A grid spreads
over the nodes, a drained node receives nothing, and a node killed mid-run costs nothing:
its trials end infra-invalid and rerun on the others, and what it kept goes when it is back."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter

import pytest

from agentmeter_tui.core.paths import runner_log_path
from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.core.fleet_support import fleet_down, fleet_leftovers, fleet_up, lose_a_worker
from tests.core.harbor_support import harbor_suite
from tests.core.sandbox_support import SMOKE, assert_smoke_verdicts, suite_copy, unique_id, wait_runner_exit
from tests.waiting import wait_for

# One worker runs them all (scripts/test.sh distributes by group): they share the module's fleet.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.xdist_group("fleet")]

# Its own names, addresses and folder: a fleet of the tests beside any fleet a developer has up.
FLEET_ENV = {"FLEET_NAME": "amt", "FLEET_NET": "10.213.78", "FLEET_DIR": "/tmp/agentmeter-fleet-tests"}


@pytest.fixture(scope="module")
def fleet():
    fleet = fleet_up(3, **FLEET_ENV)
    yield fleet
    fleet_down(fleet)


def test_a_grid_spreads_over_the_nodes(tmp_path, db, fleet):
    suite_id = unique_id("fleet-grid")
    suite = suite_copy(SMOKE, tmp_path / "suite", fleet.sandbox(), suite_id=suite_id)
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    store = Store(db)
    trials = store.trials(suite_id)
    assert len(trials) == 8
    assert_smoke_verdicts(trials, "swarm")
    used = {t["node"] for t in trials}
    assert len(used) >= 2 and used <= {fleet.node(i) for i in (1, 2, 3)}, used
    assert sum(n["trials"] for n in store.runs.nodes(suite_id)) == 8
    # The image was built once on the manager and pushed once (a line each in the runner's log);
    # the workers pulled it from the fleet's registry.
    log = runner_log_path(db).read_text()
    # (and the nodes' wall, docs/security.md "Swarm jobs", once too)
    for image in ("agentmeter/host:", "agentmeter/wall:"):
        pushes = [line for line in log.splitlines() if f"image {image}" in line]
        assert sum(f"pushing to {fleet.registry}" in line for line in pushes) == 1, log
        assert sum("pushed as" in line for line in pushes) == 1, log
    # A worker removes the stopped container of a removed service by itself, moments later.
    wait_for(lambda: fleet_leftovers(fleet, suite_id) == {}, "no leftovers of the run on any node")


def test_harbor_tasks_images_are_pushed_once_and_run_on_the_manager(tmp_path, db, fleet):
    """A Harbor trial's agent and verifier exec into its container through the manager's engine,
    so its service stays on the manager's node; its task's image still goes to the registry."""
    suite, suite_id = harbor_suite(tmp_path, "oracle")
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text().replace('kind = "docker"', fleet.sandbox()))
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    trials = {t["task_id"]: t for t in Store(db).trials(suite_id)}
    assert {k: t["status"] for k, t in trials.items()} == {"count": "passed", "greet": "passed",
                                                           "probe": "passed", "no-solution": "failed"}
    assert {t["node"] for t in trials.values() if t["status"] == "passed"} == {fleet.node(1)}
    log = runner_log_path(db).read_text()
    for task in ("count", "greet", "probe"):
        assert log.count(f"image agentmeter-task/{task}:") == 2, log  # "pushing to", "pushed as": once
    wait_for(lambda: fleet_leftovers(fleet, suite_id) == {}, "no leftovers of the run on any node")


def test_a_drained_node_receives_nothing(tmp_path, db, fleet):
    client = fleet.client()
    drained = fleet.node(2)
    node = next(n for n in client.nodes.list() if n.attrs["Description"]["Hostname"] == drained)
    spec = node.attrs["Spec"]
    node.update({**spec, "Availability": "drain"})
    try:
        suite_id = unique_id("fleet-drain")
        suite = suite_copy(SMOKE, tmp_path / "suite", fleet.sandbox(), suite_id=suite_id)
        result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
        assert result.returncode == 0, result.stderr + result.stdout
        trials = Store(db).trials(suite_id)
        assert len(trials) == 8 and all(t["status"] in ("passed", "failed") for t in trials)
        assert drained not in {t["node"] for t in trials}
    finally:
        node.reload()
        node.update({**node.attrs["Spec"], "Availability": "active"})
        client.close()


# Before the losses below: a node they killed or cut may keep refusing jobs for a stale network
# (moby/moby#37087), and this view needs the three nodes whole.
async def test_the_fleet_view_shows_the_nodes_and_a_drain_from_it_stops_placements(tmp_path, db, fleet):
    """The TUI attached to a run on the fleet: its fleet view lists the 3 nodes, each trial's
    node is the store's, and ``d`` on a node drains it: no trial started after goes there."""
    from agentmeter_tui.ui.app import AgentMeterApp
    from agentmeter_tui.ui.screens.fleet import FleetScreen
    from agentmeter_tui.ui.session import UiSession
    from agentmeter_tui.ui.settings import UiSettings
    from tests.waiting import eventually

    suite_id = unique_id("fleet-view")
    suite = suite_copy(FIXTURES / "suites" / "slow", tmp_path / "suite", fleet.sandbox(), suite_id=suite_id)
    for scenario in (suite / "scenarios").glob("*.toml"):  # trials long enough to drain between two waves
        scenario.write_text(scenario.read_text().replace("sleep 0.4", "sleep 4"))
    runner = subprocess.Popen([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless",
                               "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    drained = fleet.node(2)
    names = [fleet.node(i) for i in (1, 2, 3)]

    def store_trials() -> list[dict]:
        store = Store(db)
        try:
            return store.trials(suite_id)
        finally:
            store.close()

    try:
        wait_for(lambda: db.exists() and any(t["status"] == "running" for t in store_trials()), "a trial running")
        # Held until the drain is in place, so that trials start after it however slowly the
        # TUI gets there (with every trial started first, nothing would show where they went).
        agentmeter("pause", "--db", str(db), check=True)
        session = UiSession(db, reviewer="fleet", live=True, suite_id=suite_id)
        app = AgentMeterApp(session, screen="grid", settings=UiSettings())
        try:
            async with app.run_test(size=(160, 48)) as pilot:
                await eventually(lambda: len(session.live.nodes) == 3, "the feed's 3 nodes")
                await pilot.press("f")
                screen = await eventually(lambda: isinstance(app.screen, FleetScreen) and app.screen, "the fleet view")
                table = screen.query_one("#fleet-nodes")
                await eventually(lambda: table.row_count == 3, "3 rows in the fleet view")
                assert [str(k.value) for k in table.rows] == names
                table.move_cursor(row=names.index(drained))
                await pilot.press("d")
                await eventually(lambda: any(n["name"] == drained and n["state"] == "drain"
                                             for n in session.live.nodes), f"{drained} drained in the feed")
                cut = max(t["id"] for t in store_trials())  # every trial after this one starts on a drained node
                await asyncio.to_thread(agentmeter, "resume", "--db", str(db), check=True)
                await eventually(lambda: str(table.get_row(drained)[1]) == "drained", "the row says drained")
                await eventually(lambda: session.live.ended, "the run's end")
                await eventually(lambda: all(t.status not in ("queued", "starting", "running", "verifying")
                                             for t in session.grid.trials.values()), "every trial final on screen")
                trials = store_trials()
                # Each trial's node on screen is the store's.
                assert {t.id: t.node for t in session.grid.trials.values()} == {t["id"]: t["node"] for t in trials}
                assert {t["node"] for t in trials} <= set(names)
                later = [t for t in trials if t["id"] > cut]
                assert later and all(t["node"] != drained for t in later), (cut, trials)
        finally:
            session.close()
        out, err = runner.communicate(timeout=900)
        assert runner.returncode == 0, err + out
    finally:
        if runner.poll() is None:
            runner.kill()
        client = fleet.client()
        node = next(n for n in client.nodes.list() if n.attrs["Description"]["Hostname"] == drained)
        node.update({**node.attrs["Spec"], "Availability": "active"})
        client.close()
    wait_runner_exit(db)


def inside_sleep(store: Store, trial_id: int) -> bool:
    """Whether the trial's last event is its agent's `sleep` tool call (its result not yet in)."""
    last = list(store.events(trial_id))[-1:]
    return bool(last) and last[0][2] == "tool_call" and "sleep" in last[0][4]


# A node lost two ways: its engine and everything it started killed (the machine died; `up`
# restarts it), or its link cut (the engine lives on, unreachable; `mend` links it again).
@pytest.mark.parametrize(("loss", "back"), [("kill", "up"), ("cut", "mend")])
def test_a_node_lost_mid_run_costs_nothing(tmp_path, db, fleet, loss, back):
    suite_id = unique_id(f"fleet-{loss}")
    suite = suite_copy(FIXTURES / "suites" / "slow", tmp_path / "suite", fleet.sandbox(), suite_id=suite_id,
                       replace={"concurrency = 2": "concurrency = 6"})
    for scenario in (suite / "scenarios").glob("*.toml"):  # long enough that the kill lands mid-trial
        scenario.write_text(scenario.read_text().replace("sleep 0.4", "sleep 8"))
    # Its agent inside the sleep: a trial still "running" in its verifier job may be on another
    # node by then, and the loss would cost it nothing.
    victim, trials, lost = lose_a_worker(fleet, db, suite, suite_id, loss,
                                         lambda store, trial: inside_sleep(store, trial["id"]))
    # Every planned trial ended once with a verdict; its lost attempts were rerun elsewhere.
    verdicts = Counter((t["model"], t["task_id"], t["trial_index"]) for t in trials if t["status"] != "infra-invalid")
    assert len(verdicts) == 6 and set(verdicts.values()) == {1}, verdicts
    assert all(t["node"] != victim for t in trials if t["status"] != "infra-invalid" and t["id"] > lost[-1]["id"])
    # Back, the node drops what it kept of the lost jobs; nothing is left anywhere.
    fleet.run(back, victim.rpartition("-n")[2])
    wait_for(lambda: fleet_leftovers(fleet, suite_id) == {}, "no leftovers of the run on any node")
    # It may also keep a stale copy of the walled network (moby/moby#37087) and reject every job
    # placed there: the next run places those elsewhere and loses no verdict to it.
    again = unique_id(f"fleet-{back}")
    result = agentmeter("run", str(suite_copy(SMOKE, tmp_path / "again", fleet.sandbox(), suite_id=again)),
                        "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    trials = Store(db).trials(again)
    final = [t for t in trials if t["status"] != "infra-invalid"]
    # A job rejected there never ran: its attempt is infra-invalid, tried again on another node.
    assert len(final) == 8 and all(" exists" in t["reason"] for t in trials if t["status"] == "infra-invalid"), \
        [(t["node"], t["status"], t["reason"]) for t in trials]
    assert_smoke_verdicts(final, "swarm")
