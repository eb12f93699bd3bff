"""Redraw only what changed: a timer's flush with nothing new draws nothing, a new line
repaints its own transcript only, a clock tick repaints a pane's bottom border row only.

Counted, not timed: each test records the widgets ``refresh`` was asked to repaint.
"""

from __future__ import annotations

import pytest
from textual.widget import Widget

from agentmeter_tui.ui.screens.grid import AMS_EVERY, PREVIEW_EVERY
from agentmeter_tui.ui.widgets.grid_table import GridTable
from agentmeter_tui.ui.widgets.tail import TranscriptTail
from agentmeter_tui.ui.widgets.trial_table import TrialTable
from tests.sample_data import T0

from .conftest import SIZE, feed, make_app, settle
from .test_live import open_live


@pytest.fixture
def repaints(monkeypatch):
    """(widget, regions) for every refresh asked from now on."""
    asked: list[tuple[Widget, tuple]] = []
    refresh = Widget.refresh

    def recording(self, *regions, **kwargs):
        asked.append((self, regions))
        return refresh(self, *regions, **kwargs)

    monkeypatch.setattr(Widget, "refresh", recording)
    return asked


def come_due(screen) -> None:
    """Move the grid's throttled redraws' last times a period back, as a slow machine's would be."""
    screen._preview_at -= PREVIEW_EVERY
    screen._ams_at -= AMS_EVERY


def timer_flushes(screen, count: int = 12) -> None:
    """As the screen's timer runs them (more than a second's worth of the live screen's)."""
    for _ in range(count):
        screen._tick()


async def test_the_live_screen_draws_nothing_when_nothing_came(sample_db, repaints):
    app = make_app(sample_db, screen="live", live=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_live(pilot, count=4)
        repaints.clear()
        timer_flushes(screen)
        await pilot.pause()
        assert [type(w).__name__ for w, _ in repaints] == []


async def test_a_new_line_repaints_its_transcript_and_nothing_else(sample_db, repaints):
    app = make_app(sample_db, screen="live", live=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_live(pilot, count=4)
        tail = screen.panes[1001].query_one(TranscriptTail)
        repaints.clear()
        await feed(app, [{"type": "tick", "ts": T0 + 31, "meters": [], "finished": [], "progress": {},
                          "events": {1001: [[900, T0 + 31, "assistant", "stdout", "one more line"]]}}])
        timer_flushes(screen, 1)
        await pilot.pause()
        assert {w for w, _ in repaints} == {tail}


async def test_a_clock_tick_repaints_the_panes_bottom_border_only(sample_db, repaints):
    app = make_app(sample_db, screen="live", live=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_live(pilot, count=4)
        pane = screen.panes[1000]
        before = pane.border_subtitle
        app.session.live.clock = lambda: T0 + 45  # 13 s on: every pane's clock moves
        repaints.clear()
        timer_flushes(screen, 1)
        await pilot.pause()
        assert pane.border_subtitle != before
        on_pane = [regions for w, regions in repaints if w is pane]
        assert on_pane and all(len(regions) == 1 and regions[0].height == 1 for regions in on_pane)
        assert not any(isinstance(w, TranscriptTail) for w, _ in repaints)


async def test_the_grid_draws_nothing_when_nothing_came(sample_db, repaints):
    app = make_app(sample_db, screen="grid", live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await feed(app, count=4)
        await settle(pilot)
        screen = app.screen
        assert screen.query_one(GridTable).row_count
        # The feed changed the highlighted cell's trials and finished some: the list is redrawn
        # at most once a second and the AMS recomputed at most every three, so both may still be
        # owed. Let them come due now, as a slow machine's timer would, so that what is counted
        # below is only what a flush with nothing new draws.
        come_due(screen)
        await settle(pilot)
        repaints.clear()
        come_due(screen)  # both would be due again: nothing asks for them
        timer_flushes(screen, 4)
        await pilot.pause()
        assert [type(w).__name__ for w, _ in repaints] == []



async def test_the_grid_redraws_a_cells_trial_list_but_not_its_title_when_its_trials_change(sample_db, repaints):
    app = make_app(sample_db, screen="grid", live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        title = screen.query_one("#preview-title")
        await feed(app, count=4)
        come_due(screen)
        repaints.clear()
        screen.flush()
        await pilot.pause()
        repainted = {w for w, _ in repaints}
        assert screen.query_one(TrialTable) in repainted
        assert title not in repainted
