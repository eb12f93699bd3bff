"""The operator's hold on a trial's budget kill (op ``hold``, issue 24 item 6): a budget kill
that comes while the hold is on waits; a raise that lands in time saves the trial; a hold
that ends with no raise lets the kill through; other kills never wait; the socket refuses
holds longer than HOLD_MAX or on trials that are not running (tests/adversarial/test_hold_op.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from agentmeter_tui.core.run.budget_hold import HOLD_MAX
from agentmeter_tui.core.run.trial import TrialRun
from agentmeter_tui.core.suites.budget import Budget
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import KillReason, TrialStatus
from tests.waiting import eventually


def running_trial(budget: Budget) -> TrialRun:
    changed: list = []
    ctx = SimpleNamespace(suite=SimpleNamespace(budget_for=lambda task: budget),
                          sink=SimpleNamespace(trial_changed=changed.append),
                          caps=SimpleNamespace(reached=lambda model: None, add=lambda *spent: None))  # no run cap
    plan = SimpleNamespace(task=SimpleNamespace(id="t"), trial_index=1,
                           config=SimpleNamespace(cli=SimpleNamespace(adapter="reference", label="reference"),
                                                  model=SimpleNamespace(id="m")))
    trial = TrialRun(ctx, plan)  # type: ignore[arg-type]
    trial.id = 21
    trial.lifecycle.move(TrialStatus.STARTING)
    trial.lifecycle.move(TrialStatus.RUNNING)
    trial.changed = changed  # type: ignore[attr-defined]
    return trial


def spend(trial: TrialRun, tokens: int) -> None:
    trial._add_usage(TokenUsage(output=tokens), None)
    trial.watch.check()


async def test_a_raise_typed_during_the_hold_lands_and_the_trial_lives():
    trial = running_trial(Budget(tokens=1000))
    trial.hold_budget(HOLD_MAX)
    assert trial.meter()["budget_hold"] == pytest.approx(HOLD_MAX, abs=1)  # the pane shows it
    spend(trial, 1500)  # crosses the limit while the operator types
    assert trial.kill_reason is None and trial.admit_call() is None
    trial.raise_budget(tokens=5000)
    assert trial.kill_reason is None and not trial.hold.active
    assert trial.meter()["budget_hold"] is None
    spend(trial, 4000)  # past the new limit, no hold: killed as usual
    assert trial.kill_reason is not None and trial.kill_reason.code == "budget:tokens"


async def test_a_hold_that_runs_out_lets_the_budget_kill_through():
    trial = running_trial(Budget(tokens=1000))
    trial.hold_budget(0.05)
    spend(trial, 1500)
    assert trial.kill_reason is None
    await eventually(lambda: not trial.hold.active, "the hold's own timer to end it")
    assert trial.kill_reason is not None and trial.kill_reason.code == "budget:tokens"


async def test_released_without_a_raise_the_kill_goes_through_and_others_never_wait():
    trial = running_trial(Budget(tokens=1000))
    trial.hold_budget(HOLD_MAX)
    spend(trial, 1500)
    trial.hold_budget(0)  # the dialog was cancelled
    assert trial.kill_reason is not None and trial.kill_reason.code == "budget:tokens"
    other = running_trial(Budget(tokens=1000))
    other.hold_budget(HOLD_MAX)
    other.request_kill(KillReason("operator"))
    assert other.kill_reason is not None and other.kill_reason.code == "operator"


async def test_a_time_budget_raised_during_the_hold_moves_the_deadline():
    trial = running_trial(Budget(wall_seconds=60))
    trial.watch._wall_from = time.monotonic() - 61  # the agent started 61 s ago: its minute is up
    trial.hold_budget(HOLD_MAX)
    trial.watch._wall_due()
    assert trial.kill_reason is None and trial.hold.pending is not None  # held
    trial.raise_budget(wall_seconds=3600)
    assert trial.kill_reason is None and trial.watch._wall_timer is not None  # a new deadline, an hour on
    trial.watch._wall_timer.cancel()
