"""The TUI's budget dialog is a client of the runner too: a value that is not finite, not
positive or past what a budget takes stays in the dialog with a message and is never sent
(issue 24, item 2; `1e400` tokens (inf) used to end in an OverflowError, `1e30` in a request the
socket could not encode)."""

from __future__ import annotations

import pytest

from agentmeter_tui.ui.screens.dialogs import BudgetDialog
from tests.ui.conftest import SIZE, fake_runner, make_app, sample_db, sample_template, settle  # noqa: F401 - fixtures
from tests.ui.test_live import open_live


@pytest.mark.parametrize("typed", ["1e400", "1e30"])
async def test_the_dialog_keeps_a_bad_value_and_sends_nothing(sample_db, fake_runner, typed):
    app = make_app(sample_db, screen="live", live=True, runner=fake_runner)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_live(pilot, count=1)
        screen.select(1000)
        await pilot.press("b")
        await pilot.press(*typed, "enter")
        await settle(pilot, screen)
        assert isinstance(app.screen, BudgetDialog)  # stays open, says why
        assert "a number above 0" in str(app.screen.query_one("#budget-error").render())
        await pilot.press("escape")
        await settle(pilot, screen)
        assert fake_runner.requests == []
