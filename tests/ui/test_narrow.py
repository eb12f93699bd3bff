"""The grid, review and footer at 100 x 30 with the demo's shape, 5 models x 7 CLIs (issue 24,
item 12): CLI columns out of view are said, every model row is shown, the run bar fits its
line, the transcript keeps most of the width, and the footer loses no key silently."""

from __future__ import annotations

import sqlite3

import pytest
from textual.content import Content
from textual.widgets._footer import FooterKey

from agentmeter_tui.ui.widgets.footer import KeysFooter
from agentmeter_tui.ui.widgets.grid_table import GridTable
from agentmeter_tui.ui.widgets.run_bar import RunBar, run_bar_markup
from agentmeter_tui.ui.widgets.transcript_view import TranscriptView

from .conftest import feed, make_app, settle

NARROW = (100, 30)
MODELS = ("ace", "guzzler", "dud", "parrot", "runaway")
CLIS = ("reference", "claude-code", "codex", "gemini-cli", "qwen-code", "opencode", "kimi-cli")


@pytest.fixture
def wide_db(sample_db):
    """The sample store with a trial in every cell of the demo's 5 x 7 grid (copies of trial 1)."""
    with sqlite3.connect(sample_db) as conn:
        columns = [r[1] for r in conn.execute("pragma table_info(trials)") if r[1] not in ("id", "model", "cli",
                                                                                           "proc_token")]
        names = ", ".join(columns)
        for model in MODELS:
            for cli in CLIS:
                if not conn.execute("select 1 from trials where model = ? and cli = ?", [model, cli]).fetchone():
                    conn.execute(f"insert into trials ({names}, model, cli, proc_token) "
                                 f"select {names}, ?, ?, ? from trials where id = 1", [model, cli, f"{model}-{cli}"])
    return sample_db


async def test_the_grid_says_which_clis_are_out_of_view_and_shows_every_model(wide_db):
    app = make_app(wide_db)
    async with app.run_test(size=NARROW) as pilot:
        await settle(pilot)
        table = app.screen.query_one(GridTable)
        assert len(table.columns) == 1 + len(CLIS)
        assert "of 7" in str(table.border_subtitle) and "→" in str(table.border_subtitle)
        rows_shown = table.scrollable_content_region.height - 1  # less the header
        assert rows_shown >= 3 * len(MODELS)  # no model row clipped
        bar = app.screen.query_one(RunBar)
        assert Content.from_markup(bar._shown).cell_length <= NARROW[0]


async def test_the_live_run_bar_fits_a_narrow_line(wide_db):
    app = make_app(wide_db, live=True)
    async with app.run_test(size=NARROW) as pilot:
        await settle(pilot)
        await feed(app)
        markup = run_bar_markup(app.session, NARROW[0])
        assert Content.from_markup(markup).cell_length <= NARROW[0]
        assert "48/60" in Content.from_markup(markup).plain  # progress is what it keeps


async def test_review_leaves_the_transcript_most_of_a_narrow_screen(wide_db):
    app = make_app(wide_db, screen="review")
    async with app.run_test(size=NARROW) as pilot:
        await settle(pilot)
        assert app.screen.query_one(TranscriptView).region.width >= 55


@pytest.mark.parametrize("screen", ["review", "grid"])
async def test_the_footer_shows_only_whole_keys_and_says_how_many_are_left_out(wide_db, screen):
    app = make_app(wide_db, screen=screen)
    async with app.run_test(size=NARROW) as pilot:
        await settle(pilot)
        keys = [k for k in app.screen.query_one(KeysFooter).query(FooterKey)]
        spans = sorted((k.region.x, k.region.right) for k in keys)
        assert all(right <= NARROW[0] for _, right in spans)
        assert all(a_right <= b_left for (_, a_right), (b_left, _) in zip(spans, spans[1:], strict=False))
        help_key = next(k for k in keys if k.key_display == "?")
        shown = {k.key_display for k in keys}
        bindings = [b for (_, b, _, _) in app.screen.active_bindings.values() if b.show]
        left_out = len({b.action for b in bindings}) - (len(keys) - 1)  # the palette's key is not a binding here
        if left_out > 0:
            assert f"+{left_out}" in help_key.description
        else:
            assert "?" in shown
