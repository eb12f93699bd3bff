"""A trial's states and ends in one home (issue 33, core/run/lifecycle.py): the statuses a trial
moves through and the moves refused; the first kill asked is the one a trial ends with; what a
killed trial's final outcome says; and the time budget's timer, which lives only while the
trial's clock runs (core/run/budget_hold.py's BudgetWatch)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from agentmeter_tui.core.run.budget_hold import BudgetWatch
from agentmeter_tui.core.run.lifecycle import (
    TRANSITIONS,
    IllegalTransition,
    TrialLifecycle,
    TrialOutcome,
    killed_outcome,
)
from agentmeter_tui.core.run.trial import TrialRun
from agentmeter_tui.core.suites.budget import Budget
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import FINAL_STATUSES, INTERRUPTED_STOP, KillReason, TrialStatus
from tests.core.test_budget_hold import running_trial

S = TrialStatus


def moved(*statuses: TrialStatus) -> TrialLifecycle:
    life = TrialLifecycle()
    for status in statuses:
        life.move(status)
    return life


@pytest.mark.parametrize("path", [
    (S.STARTING, S.RUNNING, S.VERIFYING, S.PASSED),
    (S.STARTING, S.RUNNING, S.VERIFYING, S.FAILED),
    (S.STARTING, S.RUNNING, S.KILLED),  # a kill while the agent runs
    (S.STARTING, S.RUNNING, S.ERRORED),
    (S.STARTING, S.FAILED),  # a task unfit for the CLI
    (S.STARTING, S.INFRA_INVALID),  # the CLI not installed, the sandbox not opened
    (S.STARTING, S.RUNNING, S.VERIFYING, S.INFRA_INVALID),
])
def test_a_trial_moves_through_its_states_to_one_end(path):
    life = TrialLifecycle()
    assert life.status == S.QUEUED and life.elapsed() is None
    for status in path:
        life.move(status)
        assert life.status == status
        assert (life.elapsed() is None) == status.is_final  # the meter's clock runs while it is active


def test_every_status_has_its_moves_and_nothing_follows_an_end():
    assert set(TRANSITIONS) == set(TrialStatus)
    assert all(not TRANSITIONS[status] for status in FINAL_STATUSES)
    assert all(TRANSITIONS[status] for status in set(TrialStatus) - FINAL_STATUSES)


@pytest.mark.parametrize("done, to", [
    ((), S.RUNNING),  # skips its row
    ((), S.PASSED),  # a queued trial never ends: its row is made first
    ((S.STARTING,), S.VERIFYING),  # verified without an agent
    ((S.STARTING, S.RUNNING), S.STARTING),  # back
    ((S.STARTING, S.RUNNING), S.RUNNING),  # again
    ((S.STARTING, S.RUNNING, S.VERIFYING), S.RUNNING),
    ((S.STARTING, S.RUNNING, S.PASSED), S.FAILED),  # after its end
    ((S.STARTING, S.KILLED), S.RUNNING),
])
def test_an_illegal_move_is_refused_and_changes_nothing(done, to):
    life = moved(*done)
    before = life.status
    with pytest.raises(IllegalTransition, match=f"from {before} to {to}"):
        life.move(to)
    assert life.status == before


def test_an_end_is_a_final_status_with_its_reason():
    life = moved(S.STARTING, S.RUNNING)
    with pytest.raises(IllegalTransition, match="not a final status"):
        life.end(TrialOutcome(S.VERIFYING, None))
    assert life.status == S.RUNNING and life.reason is None
    life.end(TrialOutcome(S.ERRORED, "the agent said so"))
    assert (life.status, life.reason) == (S.ERRORED, "the agent said so")
    with pytest.raises(IllegalTransition, match="none: it has ended"):
        life.end(TrialOutcome(S.PASSED, None))
    assert (life.status, life.reason) == (S.ERRORED, "the agent said so")


async def test_a_kill_asked_twice_keeps_the_first_reason():
    life = moved(S.STARTING, S.RUNNING)
    asked = asyncio.ensure_future(life.kill_asked())
    assert life.ask_kill(KillReason("budget:tokens", "1500 >= 1000"))
    await asked  # the agent's wait ends
    assert not life.ask_kill(KillReason("operator"))
    assert life.kill_reason == KillReason("budget:tokens", "1500 >= 1000")
    assert life.killed() == TrialOutcome(S.KILLED, "budget:tokens")


def test_no_kill_is_taken_after_the_end_nor_an_outcome_without_one():
    life = moved(S.STARTING, S.RUNNING)
    with pytest.raises(IllegalTransition, match="not asked to be killed"):
        life.killed()
    life.end(TrialOutcome(S.PASSED, None))
    assert not life.ask_kill(KillReason("operator")) and life.kill_reason is None


@pytest.mark.parametrize("reason, outcome", [
    (KillReason("operator"), TrialOutcome(S.KILLED, "operator")),
    (KillReason("budget:time", "60 s"), TrialOutcome(S.KILLED, "budget:time")),
    (KillReason("thrash", "bash ls"), TrialOutcome(S.KILLED, "thrash")),
    (KillReason("shutdown"), TrialOutcome(S.INFRA_INVALID, INTERRUPTED_STOP)),  # runs again
    (KillReason("infra", "scripted server died"), TrialOutcome(S.INFRA_INVALID, "infra: scripted server died")),
])
def test_a_killed_trials_final_outcome(reason, outcome):
    assert killed_outcome(reason) == outcome
    life = moved(S.STARTING, S.RUNNING, S.VERIFYING)  # a kill while the verifier runs ends alike
    life.ask_kill(reason)
    life.end(life.killed())
    assert (life.status, life.reason) == (outcome.status, outcome.reason)


# -- the time budget's timer --------------------------------------------------------------------


def spender(budget: Budget) -> SimpleNamespace:
    trial = SimpleNamespace(budget=budget, usage=TokenUsage(), cost=None, status=S.RUNNING, kills=[],
                            cap_reached=lambda: None, hold_changed=lambda: None)
    trial.request_kill = trial.kills.append
    return trial


async def test_stopping_the_clock_cancels_the_wall_timer():
    trial = spender(Budget(wall_seconds=3600))
    watch = BudgetWatch(trial)
    watch.start_clock()
    timer = watch._wall_timer
    assert timer is not None and not timer.cancelled()
    watch.stop_clock()
    assert timer.cancelled() and watch._wall_timer is None
    watch._wall_due()  # as a raise or a hold's end would: no clock, no new timer
    assert watch._wall_timer is None and trial.kills == []


class Agent:
    """An agent in a fake sandbox session: it waits until it exits, or until it is killed."""

    def __init__(self) -> None:
        self.waiting, self.exited = asyncio.Event(), asyncio.Event()
        self.code = 0

    async def wait(self) -> int:
        self.waiting.set()
        await self.exited.wait()
        return self.code

    async def kill(self, policy) -> None:
        self.code = -9
        self.exited.set()


def trial_of(budget: Budget) -> tuple[TrialRun, Agent]:
    """A running trial (test_budget_hold's) whose agent runs in a fake session, and that agent."""
    trial = running_trial(budget)
    ctx = trial.ctx
    ctx.suite.spec = SimpleNamespace(suite=SimpleNamespace(kill_grace=1.0))  # type: ignore[attr-defined]
    ctx.sink.trial_events = lambda *rows: None  # type: ignore[attr-defined]
    ctx.redactor = SimpleNamespace(rows=lambda rows: (rows, 0))  # type: ignore[misc]
    ctx.writer = SimpleNamespace(add_events=lambda *rows: None)  # type: ignore[misc]
    agent = Agent()
    trial.session = SimpleNamespace(breach=None, kill=agent.kill)  # type: ignore[assignment]
    return trial, agent


async def test_the_wall_timer_lives_while_the_agent_runs_and_is_cancelled_when_it_ends():
    trial, agent = trial_of(Budget(wall_seconds=3600))
    ended = asyncio.ensure_future(trial._agent_ended(trial.session, agent))
    await agent.waiting.wait()
    timer = trial.watch._wall_timer
    assert timer is not None and not timer.cancelled()  # the hour is counted
    agent.exited.set()
    assert await ended == (0, False)
    assert timer.cancelled() and trial.watch._wall_timer is None


async def test_a_killed_trial_ends_with_the_first_kill_and_its_timer_cancelled():
    trial, agent = trial_of(Budget(wall_seconds=3600))
    ended = asyncio.ensure_future(trial._agent_ended(trial.session, agent))
    await agent.waiting.wait()
    timer = trial.watch._wall_timer
    trial.request_kill(KillReason("operator"))
    trial.request_kill(KillReason("budget:tokens", "over"))  # the second does not rename it
    assert await ended == (-9, True)
    assert timer is not None and timer.cancelled() and trial.watch._wall_timer is None
    trial.lifecycle.end(trial.lifecycle.killed())
    assert (trial.status, trial.reason, trial.kill_reason) == (S.KILLED, "operator", KillReason("operator"))


async def test_the_time_budget_kills_through_its_timer():
    trial, agent = trial_of(Budget(wall_seconds=0.01))
    assert await trial._agent_ended(trial.session, agent) == (-9, True)  # the timer, not the test, ended it
    assert trial.kill_reason == KillReason("budget:time", "0.01 s")
    assert trial.lifecycle.killed() == TrialOutcome(S.KILLED, "budget:time")
    assert trial.watch._wall_timer is None


def test_a_refused_status_never_reaches_the_trials_row():
    trial, _ = trial_of(Budget())
    updates: list = []
    trial.ctx.writer.update_trial = lambda *update: updates.append(update)  # type: ignore[attr-defined]
    with pytest.raises(IllegalTransition):
        trial._set_status(S.STARTING)
    assert updates == [] and trial.status == S.RUNNING
    trial._set_status(S.VERIFYING)
    assert updates == [(21, {"status": "verifying"})]


def test_a_forced_end_ends_whatever_the_status():
    """After an end the moves refused (a bug on our side, logged), the trial still reads as ended."""
    lifecycle = moved(S.STARTING)
    lifecycle.force_end(TrialOutcome(S.INFRA_INVALID, "infra: boom"))
    assert (lifecycle.status, lifecycle.reason) == (S.INFRA_INVALID, "infra: boom")
    assert lifecycle.elapsed() is None and not lifecycle.ask_kill(KillReason("operator"))
