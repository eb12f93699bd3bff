"""The kill and budget dialogs are bound to their trial (issue 24, item 6).

A dialog opened on a running trial can outlive it (its budget kills it, it finishes): the
dialog then says so and its action sends nothing. Opening the budget dialog on one trial asks
the runner to hold that trial's budget kill while the raise is typed; a cancel releases it.
"""

from __future__ import annotations

from agentmeter_tui.ui.screens.dialogs import BudgetDialog, ConfirmDialog
from agentmeter_tui.ui.widgets.trial_pane import TrialPane
from tests.sample_data import T0

from .conftest import SIZE, feed, make_app, notifications_of, settle
from .test_live import open_live


def end_trial(app, trial_id: int, reason: str = "budget:tokens") -> dict:
    done = dict(app.session.live.trials[trial_id].meter, status="killed", reason=reason, elapsed=None)
    return {"type": "tick", "ts": T0 + 33, "meters": [], "events": {}, "finished": [done], "progress": {}}


def record_holds(app) -> list[tuple[int, float]]:
    holds: list[tuple[int, float]] = []

    async def hold_budget(trial_id: int, seconds: float) -> dict:
        holds.append((trial_id, seconds))
        return {"ok": True, "trial": trial_id, "held": seconds or None}

    app.session.hold_budget = hold_budget
    return holds


async def open_dialog(pilot, key: str, trial_id: int):
    """Three trials running; ``key`` pressed on ``trial_id``'s pane: (screen, dialog, holds asked)."""
    screen = await open_live(pilot, count=3)
    holds = record_holds(pilot.app)
    screen.select(trial_id)
    await pilot.press(key)
    await settle(pilot, pilot.app.screen)
    return screen, pilot.app.screen, holds


async def test_a_kill_dialog_whose_trial_ended_says_so_and_kills_nothing(sample_db, fake_runner):
    app = make_app(sample_db, screen="live", live=True, runner=fake_runner)
    async with app.run_test(size=SIZE) as pilot:
        screen, dialog, _ = await open_dialog(pilot, "k", 1001)
        told = notifications_of(app)
        assert isinstance(dialog, ConfirmDialog)
        await feed(app, [end_trial(app, 1001)])  # its budget killed it while the operator read the question
        await pilot.pause()
        assert "has ended: killed (budget:tokens)" in str(dialog.query_one("#dialog-ended").render())
        await pilot.press("y")
        await settle(pilot, screen)
        assert fake_runner.requests == []  # no "Kill failed: trial 1001 is not running"
        assert any("already ended" in t for t in told) and not any("failed" in t for t in told)


async def test_the_budget_dialog_holds_the_trials_budget_kill_until_raise_or_cancel(sample_db, fake_runner,
                                                                                   monkeypatch):
    # The countdown redraws once a second: a still clock keeps a slow machine's "29 s" out of it.
    monkeypatch.setattr(BudgetDialog, "clock", staticmethod(lambda: 1000.0))
    app = make_app(sample_db, screen="live", live=True, runner=fake_runner)
    async with app.run_test(size=SIZE) as pilot:
        screen, dialog, holds = await open_dialog(pilot, "b", 1000)
        assert isinstance(dialog, BudgetDialog)
        assert holds == [(1000, 30.0)]
        assert "held for 30 s" in str(dialog.query_one("#budget-hold").render())
        await pilot.press("escape")  # cancelled: the hold is released at once
        await settle(pilot, screen)
        assert holds == [(1000, 30.0), (1000, 0)]
        await pilot.press("b")
        await settle(pilot, app.screen)
        await pilot.press(*"400000", "enter")  # a raise ends the hold on the runner's side
        await settle(pilot, screen)
        assert holds == [(1000, 30.0), (1000, 0), (1000, 30.0)]
        assert fake_runner.requests == [("budget", {"trial": 1000, "tokens": 400000})]


async def test_a_budget_dialog_whose_trial_ended_says_so_and_raises_nothing(sample_db, fake_runner):
    app = make_app(sample_db, screen="live", live=True, runner=fake_runner)
    async with app.run_test(size=SIZE) as pilot:
        screen, dialog, holds = await open_dialog(pilot, "b", 1000)
        assert isinstance(dialog, BudgetDialog)
        await pilot.press(*"400000")
        await feed(app, [end_trial(app, 1000)])
        await pilot.pause()
        assert "has ended: killed (budget:tokens)" in str(dialog.query_one("#budget-error").render())
        await pilot.press("enter")
        await settle(pilot, screen)
        assert fake_runner.requests == [] and holds == [(1000, 30.0)]


async def test_the_pane_shows_the_hold(sample_db):
    app = make_app(sample_db, screen="live", live=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_live(pilot, count=1)
        meter = dict(app.session.live.trials[1000].meter, budget_hold=28.0)
        await feed(app, [{"type": "tick", "ts": T0 + 32, "meters": [meter], "finished": [], "events": {},
                          "progress": {}}])
        await settle(pilot, screen)
        await settle(pilot, screen)
        pane = screen.query_one("#pane-1000", TrialPane)
        assert "budget kill held 28 s" in str(pane.border_subtitle)


async def test_k_on_a_pane_whose_trial_just_ended_says_how_it_ended(sample_db, fake_runner):
    app = make_app(sample_db, screen="live", live=True, runner=fake_runner)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_live(pilot, count=2)
        told = notifications_of(app)
        await feed(app, [end_trial(app, 1000)])
        await settle(pilot, screen)
        screen.select(1000)  # its pane lingers with its final status
        await pilot.press("k")
        assert not isinstance(app.screen, ConfirmDialog) and fake_runner.requests == []
        assert told == ["Trial #1000 has already ended: killed (budget:tokens)."]
