"""The scheduler never loses a slot, whatever raises around a trial (issue 24, item 2): a
trial that fails in the runner before it runs is retried, and the schedule neither shrinks
(a cell never run, the run marked finished) nor hangs on a concurrency slot nobody holds."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES

# The runner, with one fault injected into the first trial the scheduler makes.
RUNNER = """
import sys
from agentmeter_tui.core.run import runner, scheduler, trial

where = sys.argv[1]
faults = {"left": 1}

def fault():
    if faults["left"]:
        faults["left"] -= 1
        raise RuntimeError("injected fault")

class Faulty(trial.TrialRun):
    def __init__(self, ctx, plan):
        if where == "init":
            fault()
        super().__init__(ctx, plan)

    def raise_budget(self, **limits):
        if where == "raise_budget":
            fault()
        super().raise_budget(**limits)

scheduler.TrialRun = Faulty
made = scheduler.Scheduler.__init__

def with_override(self, *args, **kwargs):
    made(self, *args, **kwargs)
    self._budget_overrides = {"tokens": 10**6}  # as after `agentmeter budget --tokens` during a run

scheduler.Scheduler.__init__ = with_override
bind = scheduler.Placement.bind

def bind_faulty(self, token, slot):
    if where == "bind":
        fault()
    bind(self, token, slot)

scheduler.Placement.bind = bind_faulty
sys.exit(runner.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("where", ["init", "raise_budget", "bind"])
def test_a_fault_around_a_trial_neither_drops_it_nor_holds_its_slot(where, tmp_path):
    db = tmp_path / "agentmeter.db"
    suite = FIXTURES / "suites" / "slow"
    result = subprocess.run([sys.executable, "-c", RUNNER, where, "--suite", str(suite), "--db", str(db)],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    assert "injected fault" in result.stderr
    store = Store(db)
    assert len(store.trials("slow", "status = 'passed'")) == 6
    assert next(store.db.query("select status from runs"))["status"] == "finished"
