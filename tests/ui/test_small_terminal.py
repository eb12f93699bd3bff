"""Every screen at 80 x 24, and the live header at 100 x 30 (issue 38, item 12): the key
figures are on the screen, read from what the terminal shows; a narrow line drops its least
important fields first (the reviewer, the burn rate, the forecast), never the spend and cost,
and a trials table narrows its reason and task columns before it would cut the score."""

from __future__ import annotations

from tests.waiting import eventually

from .conftest import FakeRunner, feed, make_app, screen_text, settle

SMALL = (80, 24)
MONEY = {"caps": [{"scope": "run", "name": "", "usd": 20.0, "tokens": None, "spent_usd": 6.38, "spent_tokens": 0,
                   "share": 0.32, "state": "ok", "forecast_usd": 9.1, "forecast_tokens": 3_000_000,
                   "forecast_passes": False}],
         "forecast": {"basis": 48, "usd": {"spent": 6.38, "projected": 9.1, "low": 8.0, "high": 10.2}}}


async def opened(pilot, keys: tuple[str, ...] = ()) -> str:
    await settle(pilot)
    for key in keys:
        await pilot.press(key)
        await settle(pilot)
    return screen_text(pilot.app)


def with_money(app) -> None:
    progress = dict(app.session.live.progress, **MONEY)
    app._feed_message({"type": "tick", "ts": 0, "meters": [], "finished": [], "events": {}, "progress": progress})


async def test_the_live_header_keeps_spend_and_cost_at_100x30_and_80x24(sample_db):
    for size in ((100, 30), SMALL):
        app = make_app(sample_db, screen="live", live=True)
        async with app.run_test(size=size) as pilot:
            await feed(app)
            with_money(app)
            header = (await opened(pilot)).splitlines()[0]
            assert "48/60" in header and "2.3M tok · $6.38" in header, (size, header)


async def test_the_grid_at_80x24_keeps_the_trials_score_column(sample_db):
    app = make_app(sample_db, live=True)
    async with app.run_test(size=SMALL) as pilot:
        await feed(app)
        text = await opened(pilot)
        assert "$6.38" in text.splitlines()[0]
        header = next(line for line in text.splitlines() if "status" in line and "tokens" in line)
        assert "USD" in header and "score" in header, text
        assert "ace" in text and "parrot" in text  # the model rows
        table = pilot.app.screen.query_one("#cell-preview")
        assert sum(c.width + 2 for c in table.columns.values()) <= SMALL[0]


async def test_the_cell_screen_at_80x24(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SMALL) as pilot:
        text = await opened(pilot, ("enter",))
        assert "trials of this cell" in text and "score" in text and "$0.022" in text, text


async def test_the_live_screen_at_80x24(sample_db):
    app = make_app(sample_db, screen="live", live=True)
    async with app.run_test(size=SMALL) as pilot:
        await feed(app)
        await opened(pilot)
        # the panes lay out as the feed's trials arrive: wait for the last of them, not a frame
        text = await eventually(lambda: all(part in (t := screen_text(pilot.app)) for part in (
            "5 more running", "#1000 count-lines", "$0.160", "tok", "USD")) and t, "the panes and their meters")
        assert "5 more running" in text


async def test_the_review_screen_at_80x24(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SMALL) as pilot:
        text = await opened(pilot)
        assert "Review #" in text and "Score" in text and "press 0 1 2" in text, text


async def test_the_report_screen_at_80x24(sample_db):
    """Table 2 keeps its figures (its columns, not names in a 20-column strip beside the
    charts); ``c`` swaps the charts in and back."""
    app = make_app(sample_db, screen="report")
    async with app.run_test(size=SMALL) as pilot:
        text = await opened(pilot)
        assert "Table 2" in text and "ace" in text, text
        assert "Pass" in text and "USD/P" in text and "Pass % vs USD" not in text, text
        charts = await opened(pilot, ("c",))
        assert "USD / pass" in charts and "AMS heatmap" in charts and "Table 2" not in charts, charts
        back = await opened(pilot, ("c",))
        assert "USD/P" in back, back


async def test_help_at_80x24_fits_and_scrolls(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SMALL) as pilot:
        await opened(pilot, ("question_mark",))
        text = await eventually(lambda: "Remap a key" in (t := screen_text(pilot.app)) and t, "the help")
        lines = text.splitlines()
        top = next(i for i, line in enumerate(lines) if line.startswith("╭") and "Keys" in lines[i + 1])
        bottom = next(i for i, line in enumerate(lines) if i > top and line.startswith("╰"))
        assert lines[top].rstrip().endswith("╮") and lines[bottom].rstrip().endswith("╯"), text  # inside the screen
        assert "review      0" in text and "Score 0" in text
        table = pilot.app.screen.query_one("#help-table")
        assert table.max_scroll_y > 0  # the rest of the keys are a scroll away
        table.move_cursor(row=table.row_count - 1)  # the keys of the dialogs come last
        await eventually(lambda: "dialogs" in screen_text(pilot.app), "the last keys scrolled into view")


async def test_the_dialogs_at_80x24(sample_db):
    runner = FakeRunner()
    app = make_app(sample_db, live=True, runner=runner)
    async with app.run_test(size=SMALL) as pilot:
        await feed(app)
        with_money(app)
        text = await opened(pilot, ("dollar_sign",))
        assert "Set cap (enter)" in text and "Remove cap (ctrl+r)" in text and "Cancel (esc)" in text, text
        assert "USD" in text and "tokens" in text
        flat = " ".join(text.replace("│", " ").split())  # the title wraps at 80 columns, never cut
        assert "raising it resumes)" in flat, text
        await pilot.press("escape", "R")
        await settle(pilot)
        box = pilot.app.screen.query_one(".dialog-box")
        assert box.region.bottom <= SMALL[1] and box.region.right <= SMALL[0]  # it scrolls, inside the screen
        box.scroll_end(animate=False)
        await eventually(lambda: "Rerun (enter)" in (t := screen_text(pilot.app)) and "Cancel (esc)" in t,
                         "the rerun dialog's buttons scrolled into view")


async def test_a_held_run_bar_at_80x24_keeps_the_spend(sample_db):
    app = make_app(sample_db, live=True)
    async with app.run_test(size=SMALL) as pilot:
        await feed(app)
        progress = dict(app.session.live.progress, held=["cap reached: run: 12000 >= 12000"], **MONEY)
        app._feed_message({"type": "tick", "ts": 0, "meters": [], "finished": [], "events": {}, "progress": progress})
        header = (await opened(pilot)).splitlines()[0]
        assert "HELD" in header and "cap reached" in header and "$6.38" in header, header
