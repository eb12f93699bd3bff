"""The operator's day: a grid started in the background, the live screen attached in a real
terminal, a runaway's budget raised in time (its kill held while the figure is typed), then
the runaway killed by hand, the run stopped mid-way and started again; the published tables
must equal those of a run nobody touched (stop turns no running trial into a counted result)."""

from __future__ import annotations

import json
import shutil

import pytest

from agentmeter_tui.core.run.control import runner_alive
from agentmeter_tui.core.store import Store
from tests.waiting import wait_for

from .support import ROOT, TmuxSession, agentmeter, clean_env, command, report

pytestmark = [pytest.mark.slow]

DEMO = ROOT / "suites" / "demo"  # 5 scripted models x the reference agent x 3 tasks x 2 trials


@pytest.fixture(autouse=True)
def _tmux() -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (.ci/run installs it)")


def _counted(db) -> dict[tuple, str]:
    """The latest attempt's status per cell: what the report counts."""
    store = Store(db)
    try:
        latest: dict[tuple, dict] = {}
        for t in store.trials():
            key = (t["task_id"], t["model"], t["cli"], t["trial_index"])
            if key not in latest or (t["attempt"] or 0) >= (latest[key]["attempt"] or 0):
                latest[key] = t
        return {key: t["status"] for key, t in latest.items()}
    finally:
        store.close()


def _passes(db) -> list[tuple]:
    data = json.loads(report(db, "--format", "json"))
    return [(c["model"], c["cli"], c["passes"], c["passes_by_tier"]) for c in data["configurations"]]


def test_attach_raise_in_time_kill_stop_and_run_again(tmp_path):
    db = tmp_path / "operator.db"
    started = command("run", str(DEMO), "--detach", "--db", str(db))
    assert started.returncode == 0, started.stderr
    tui = TmuxSession(agentmeter("attach", "--db", str(db)), clean_env(tmp_path))
    try:
        tui.keys("l")  # the live panes
        tui.wait_for("#1 count-lines · runaway × reference")
        tui.keys("b")
        tui.wait_for("budget kill is held for")  # the runner holds it while the figure is typed
        tui.keys(*"100000000")
        tui.wait_for("100000000")
        tui.keys("Enter")
        tui.wait_for("budget now")
        tui.keys("k")
        tui.wait_for("Kill trial #1?")
        tui.keys("y")
        tui.wait_for("killed")
        tui.keys("q")  # the TUI goes; the run goes on
        wait_for(lambda: not tui.alive(), "the TUI to quit")
    finally:
        tui.close()
    assert runner_alive(db)
    store = Store(db)
    try:
        killed = store.trial(1)
        assert (killed["status"], killed["reason"]) == ("killed", "operator")
    finally:
        store.close()

    stopped = command("stop", "--db", str(db))
    assert stopped.returncode == 0, stopped.stderr
    wait_for(lambda: not runner_alive(db), "the runner to stop")
    again = command("run", str(DEMO), "--headless", "--db", str(db))
    assert again.returncode == 0, again.stderr

    untouched = tmp_path / "untouched.db"
    done = command("run", str(DEMO), "--headless", "--db", str(untouched))
    assert done.returncode == 0, done.stderr
    # The runaway the operator killed is killed in the untouched run too (by its budget); every
    # other cell ends as it does when nobody stops the run: interrupted trials ran again.
    assert _counted(db) == _counted(untouched)
    assert _passes(db) == _passes(untouched)
