"""SVG snapshots of every screen at 160x48, from the fixed sample store and fake feed messages.

One class per screen. Regenerate after a deliberate change with
``pytest tests/ui/test_snapshots.py --snapshot-update`` and look at the report first.
"""

from __future__ import annotations

import pytest

from .conftest import SIZE, feed, make_app, settle


async def _settled(pilot) -> None:
    await settle(pilot)
    await settle(pilot)


async def _live(pilot) -> None:
    await settle(pilot)
    await feed(pilot.app, count=7)
    await _settled(pilot)


class TestGrid:
    def test_grid(self, snap_compare, sample_db):
        assert snap_compare(make_app(sample_db), terminal_size=SIZE, run_before=_settled)

    def test_grid_light(self, snap_compare, sample_db):
        assert snap_compare(make_app(sample_db, theme="agentmeter-light"), terminal_size=SIZE, run_before=_settled)

    def test_cell(self, snap_compare, sample_db):
        async def open_cell(pilot):
            await _settled(pilot)
            await pilot.press("down", "enter")
            await _settled(pilot)

        assert snap_compare(make_app(sample_db), terminal_size=SIZE, run_before=open_cell)


class TestLive:
    def test_live_panes(self, snap_compare, sample_db):
        assert snap_compare(make_app(sample_db, screen="live", live=True), terminal_size=SIZE, run_before=_live)

    def test_live_light(self, snap_compare, sample_db):
        app = make_app(sample_db, screen="live", live=True, theme="agentmeter-light")
        assert snap_compare(app, terminal_size=SIZE, run_before=_live)

    def test_kill_confirm(self, snap_compare, sample_db):
        async def ask(pilot):
            await _live(pilot)
            await pilot.press("k")
            await pilot.pause()

        assert snap_compare(make_app(sample_db, screen="live", live=True), terminal_size=SIZE, run_before=ask)

    def test_maximized(self, snap_compare, sample_db):
        async def maximize(pilot):
            await _live(pilot)
            await pilot.press("right", "m")
            await _settled(pilot)

        assert snap_compare(make_app(sample_db, screen="live", live=True), terminal_size=SIZE, run_before=maximize)


class TestReview:
    def test_review(self, snap_compare, sample_db):
        assert snap_compare(make_app(sample_db, screen="review"), terminal_size=SIZE, run_before=_settled)

    def test_review_funnel_scored(self, snap_compare, sample_db):
        async def scored(pilot):
            await _settled(pilot)
            pilot.app.screen.open(17)
            await _settled(pilot)
            await pilot.press("e")
            await _settled(pilot)

        assert snap_compare(make_app(sample_db, screen="review"), terminal_size=SIZE, run_before=scored)

    def test_review_light(self, snap_compare, sample_db):
        app = make_app(sample_db, screen="review", theme="agentmeter-light")
        assert snap_compare(app, terminal_size=SIZE, run_before=_settled)


class TestReviewers:
    def test_review_blind(self, snap_compare, sample_db):
        app = make_app(sample_db, screen="review")
        app.session.blind, app.session.blind_seed = True, 5
        assert snap_compare(app, terminal_size=SIZE, run_before=_settled)

    def test_adjudicate(self, snap_compare, sample_db):
        from agentmeter_tui.core.store import Store

        store = Store(sample_db)
        store.reviews.add_score(1, 0, "bo", "never ran the tests")
        store.db.execute("update scores set created_at = '2026-06-04T11:00:00.000+00:00' where reviewer = 'bo'")
        store.db.conn.commit()
        store.close()
        assert snap_compare(make_app(sample_db, screen="adjudicate"), terminal_size=SIZE, run_before=_settled)

    def test_compare(self, snap_compare, sample_db):
        async def compare(pilot):
            await _settled(pilot)
            pilot.app.open_compare(1, 2)  # ace under reference and under claude-code, count-lines
            await _settled(pilot)

        assert snap_compare(make_app(sample_db, screen="review"), terminal_size=SIZE, run_before=compare)


class TestReport:
    def test_report(self, snap_compare, sample_db):
        assert snap_compare(make_app(sample_db, screen="report"), terminal_size=SIZE, run_before=_settled)

    def test_report_light(self, snap_compare, sample_db):
        app = make_app(sample_db, screen="report", theme="agentmeter-light")
        assert snap_compare(app, terminal_size=SIZE, run_before=_settled)


class TestHelp:
    def test_help(self, snap_compare, sample_db):
        async def help_(pilot):
            await _settled(pilot)
            await pilot.press("question_mark")
            await pilot.pause()

        assert snap_compare(make_app(sample_db), terminal_size=SIZE, run_before=help_)


@pytest.fixture(autouse=True)
def _no_cursor_blink(monkeypatch):
    from textual.widgets import Input

    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)
