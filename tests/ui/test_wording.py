"""Words on screen that said something untrue or left something out (issue 24, item 13)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from agentmeter_tui.core.store import Store
from agentmeter_tui.ui.palette import app_commands
from agentmeter_tui.ui.screens.grid import LEGEND
from agentmeter_tui.ui.screens.help import HelpScreen
from agentmeter_tui.ui.widgets.meters import budget_markup
from agentmeter_tui.ui.widgets.transcript_view import TranscriptView
from tests.sample_data import sample_meter

from .conftest import SIZE, make_app, notifications_of, settle
from .test_review import open_review

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tui.md"


def test_a_time_limit_without_a_clock_yet_is_not_no_limit():
    """A trial starting (no elapsed yet) under a 45 s budget: the subtitle says "- / 0:45",
    so the bar must not say there is no limit."""
    meter = sample_meter(1, "ace", "reference", "t", 1, status="starting")
    meter["budget"] = {"wall_seconds": 45.0, "tokens": None, "usd": None}
    bars = budget_markup(meter, None, 90)
    assert "time no limit" not in bars and "time —" in bars
    assert "tok no limit" in bars and "usd no limit" in bars  # these really have none


def test_every_grid_mark_is_in_the_legend_and_the_docs():
    docs = DOCS.read_text()
    for mark in ("+?", "⇣"):
        assert mark in LEGEND
    for mark in ("`+?`", "`↺ usage`", "`Σ`", "`≠ cost`"):
        assert mark in docs, mark
    assert "56 x 13 cells each" not in docs and "at least 56 x 13" in docs


async def test_the_palettes_resume_says_what_resume_does(sample_db):
    app = make_app(sample_db, live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.session.live.progress["paused"] = True
        resume = next(c for c in app_commands(app, app.screen) if c.title == "Resume the schedule")
        app.session.live.progress["paused"] = False
        pause = next(c for c in app_commands(app, app.screen) if c.title == "Pause the schedule")
        assert resume.help != pause.help and "no new trials" not in resume.help.lower()


async def test_the_key_table_shows_every_description_whole(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        from textual.widgets import DataTable

        table = app.screen.query_one(DataTable)
        width = table.columns[list(table.columns)[2]].width
        for key in table.rows:
            text = table.get_row(key)[2].plain
            assert table.rows[key].height * width >= len(text), text  # wrapped in full, not cut


async def test_the_review_title_says_queue_position_not_finished_count(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)
        title = str(screen.query_one("#review-title").render())
        assert "in the queue" in title and "finished" not in title


async def test_a_search_with_no_hit_at_all_says_so(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)
        told = notifications_of(app)
        await pilot.press("slash", *"zebra-xylophone", "enter")
        await settle(pilot)
        assert told == ["No match for 'zebra-xylophone' in this transcript."]
        assert screen.query_one(TranscriptView).doc is not None


async def test_the_adjudication_panel_does_not_say_not_scored_beside_the_scores(sample_db):
    with closing(Store(sample_db)) as store:
        store.reviews.add_score(5, 0, "ana")
        store.reviews.add_score(5, 3, "bo")
    app = make_app(sample_db, screen="adjudicate")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = str(app.screen.query_one("#score-panel").render())
        assert "not scored yet" not in panel and "no final score yet" in panel


async def test_blind_review_shows_no_event_numbers_that_would_betray_hidden_lines(sample_db):
    from .test_reviewers import blind_app

    app = blind_app(sample_db, "cy", seed=3)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TranscriptView)
        assert view.doc is not None and len(view.doc)
        seqs = list(view.doc.index.seqs)
        assert any(b - a > 1 for a, b in zip(seqs, seqs[1:], strict=False))  # lines were hidden
        gutters = [view.render_line(y).text[:7] for y in range(min(10, view.size.height))]
        assert not any(ch.isdigit() for g in gutters for ch in g), gutters
