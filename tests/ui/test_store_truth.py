"""After a run ends, and on attach, the screens show what the store says (issue 24, item 3).

The feed is a stream of news: a client that attached late, was dropped and reconnected, or
saw the last trials finish while it redrew, can hold meters that the store has long since
overtaken. These tests make the feed's last word disagree with the store and check that the
screens end up showing the store.
"""

from __future__ import annotations

import sqlite3

from agentmeter_tui.ui.screens.cell import CellScreen
from agentmeter_tui.ui.widgets.grid_table import GridTable
from agentmeter_tui.ui.widgets.trial_table import TrialTable
from tests.sample_data import T0, sample_meter
from tests.waiting import eventually

from .conftest import SIZE, feed, make_app, settle

ACE_REF = ("ace", "reference")


def _store_cell(db, model: str, cli: str) -> tuple[int, float]:
    with sqlite3.connect(db) as conn:
        count, usd = conn.execute("select count(*), sum(cost_usd) from trials where model = ? and cli = ?",
                                  [model, cli]).fetchone()
    return count, usd


def _snapshot(running: list[dict], done: list[dict] | None = None, *, done_count: int = 47) -> dict:
    progress = {"done": done_count, "total": 48, "running": len(running), "queued": 0, "paused": False,
                "stopping": False}
    return {"type": "snapshot", "run_id": 1, "suite": "sample", "pid": 0, "started": T0, "progress": progress,
            "running": running, "done": done or []}


async def test_after_the_run_ends_the_grid_and_cell_show_the_store(sample_db):
    """The feed's last meter says trial 1 runs (a finished message the client missed); the
    runner then says the schedule finished. The store has trial 1 passed: so must the screens."""
    app = make_app(sample_db, live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        stale = sample_meter(1, "ace", "reference", "count-lines", 1, fraction=0.9)
        await feed(app, [_snapshot([])])
        await settle(pilot)
        await feed(app, [{"type": "tick", "ts": T0, "meters": [stale], "finished": [], "events": {}}])
        await settle(pilot)
        assert app.session.grid.cell(ACE_REF).running == 1  # the feed's word, for now
        app._feed_ended("finished", None)
        await eventually(lambda: app.session.grid.cell(ACE_REF).running == 0, "the grid to re-read the store")
        await settle(pilot)
        count, usd = _store_cell(sample_db, *ACE_REF)
        cell = app.session.grid.cell(ACE_REF)
        assert (cell.done, cell.running, cell.unpriced) == (count, 0, 0)
        assert abs(cell.usd - usd) < 1e-9  # the store's cost, not the feed's half-way figure
        text = app.screen.query_one(GridTable).get_cell(*ACE_REF).plain
        assert "▶" not in text and "+?" not in text
        assert not app.session.live.running()  # no pane or list still counts it as running
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, CellScreen)
        rows = app.screen.query_one(TrialTable)
        statuses = {rows.get_row(key)[3].plain if hasattr(rows.get_row(key)[3], "plain") else str(rows.get_row(key)[3])
                    for key in rows.rows}
        assert not any("running" in s for s in statuses)


async def test_on_attach_trials_the_run_finished_before_the_snapshot_are_final(sample_db):
    """The store was read while trial 1 still ran; it finished before the feed's snapshot,
    which lists it under ``done``: the grid must not keep it running."""
    with sqlite3.connect(sample_db) as conn:
        conn.execute("update trials set status = 'running', cost_usd = null where id = 1")
    app = make_app(sample_db, live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.session.grid.cell(ACE_REF).running == 1
        with sqlite3.connect(sample_db) as conn:
            conn.execute("update trials set status = 'passed', cost_usd = 0.25 where id = 1")
        done = sample_meter(1, "ace", "reference", "count-lines", 1, fraction=1.0, status="passed")
        done["cost_usd"], done["elapsed"] = 0.25, None
        await feed(app, [_snapshot([], [done], done_count=48)])
        await settle(pilot)
        cell = app.session.grid.cell(ACE_REF)
        assert (cell.running, cell.unpriced) == (0, 0)
        assert "▶" not in app.screen.query_one(GridTable).get_cell(*ACE_REF).plain
