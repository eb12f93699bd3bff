"""The grid (home) and cell screens: cells from the store, updates from the feed, keys."""

from __future__ import annotations

from agentmeter_tui.ui.screens.cell import CellScreen
from agentmeter_tui.ui.screens.grid import GridScreen
from agentmeter_tui.ui.screens.review import ReviewScreen
from agentmeter_tui.ui.widgets.grid_table import GridTable
from agentmeter_tui.ui.widgets.trial_table import TrialTable

from .conftest import SIZE, feed, make_app, settle


async def test_grid_shows_every_configuration_with_its_trials(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, GridScreen)
        table = app.screen.query_one(GridTable)
        assert table.row_count == 4  # models
        assert len(table.columns) == 3  # label + 2 CLIs
        cell = app.session.grid.cell(("ace", "reference"))
        assert (cell.done, cell.total, cell.passes) == (6, 6, 6)
        text = table.get_cell("ace", "reference").plain
        assert "6/6" in text and "✓6" in text
        parrot = table.get_cell("parrot", "reference").plain
        assert "☠6" in parrot and "↻6" in parrot  # killed and thrashing markers
        dud = table.get_cell("dud", "claude-code").plain
        assert "!2" in dud  # errored


async def test_arrows_move_and_the_preview_follows(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(GridTable)
        assert table.current_config == ("ace", "reference")
        await pilot.press("right")
        assert table.current_config == ("ace", "claude-code")
        await pilot.press("down", "down")
        assert table.current_config == ("dud", "claude-code")
        await pilot.press("left")
        assert table.current_config == ("dud", "reference")
        await pilot.press("up")
        assert table.current_config == ("guzzler", "reference")
        preview = app.screen.query_one("#cell-preview", TrialTable)
        assert preview.row_count == 6
        assert "guzzler" in str(app.screen.query_one("#preview-title").render())


async def test_enter_opens_the_cell_and_a_trial_in_review(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, CellScreen)
        assert app.screen.config == ("ace", "reference")
        trials = app.screen.query_one(TrialTable)
        assert trials.row_count == 6
        first = trials.current_id
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ReviewScreen)
        assert app.screen.trial_id == first


async def test_escape_leaves_the_cell(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("escape")
        assert isinstance(app.screen, GridScreen)


async def test_feed_updates_only_the_cells_it_touches(sample_db):
    app = make_app(sample_db, live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen, table = app.screen, app.screen.query_one(GridTable)
        updated: list = []
        original = table.set_cells
        table.set_cells = lambda changes: (updated.extend(changes), original(changes))  # type: ignore[method-assign]
        await feed(app, count=2)
        screen.flush()
        running = {(m["model"], m["cli"]) for m in app.session.live.trials and
                   [t.meter for t in app.session.live.trials.values()]}
        assert {tuple(u) for u in updated} == {(m, c) for m, c in running}
        assert app.session.grid.cell(("ace", "reference")).running == 1
        updated.clear()
        screen.flush()  # nothing new: nothing redrawn
        assert updated == []


def test_cells_narrow_to_fit_many_clis_and_the_side_panel_goes_first():
    from agentmeter_tui.ui.grid_state import GridState
    from agentmeter_tui.ui.widgets.grid_table import CELL_WIDTH, MIN_CELL_WIDTH, layout_for

    two = GridState(["ace", "dud"], ["reference", "codex"])
    assert layout_for(160, two) == (CELL_WIDTH, True)
    seven = GridState(["runaway", "ace"], ["reference", "claude-code", "codex", "gemini-cli", "kimi-cli",
                                           "opencode", "qwen-code"])
    width, side = layout_for(160, seven)
    assert not side and MIN_CELL_WIDTH <= width < CELL_WIDTH
    assert 9 + 7 * (width + 2) + 4 <= 160  # every column on screen


async def test_a_changed_cell_is_drawn_anew_and_the_others_come_from_cache(sample_db):
    app = make_app(sample_db, live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen, table = app.screen, app.screen.query_one(GridTable)
        await pilot.pause()

        def renders() -> dict:
            cache = table._cell_render_cache
            return {(key[0].value, key[1].value): id(cache.get(key)) for key in cache.keys()}

        before = renders()
        await feed(app, count=2)
        screen.flush()
        await pilot.pause()
        after = renders()
        running = {(t.meter["model"], t.meter["cli"]) for t in app.session.live.trials.values()}
        assert running and ("dud", "claude-code") not in running
        for model, cli in running:
            assert "▶1" in table.get_cell(model, cli).plain
            assert after.get((model, cli)) != before.get((model, cli))  # drawn anew...
        assert after[("dud", "claude-code")] == before[("dud", "claude-code")]  # ...the others kept
        assert "▶1" in app.export_screenshot()  # and the frame shows the new figures
