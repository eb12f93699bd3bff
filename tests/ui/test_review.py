"""The review screen: the transcript, folding, search, jumps, scoring, notes, next unscored."""

from __future__ import annotations

from agentmeter_tui.core.store import Store
from agentmeter_tui.ui.screens.dialogs import NoteDialog
from agentmeter_tui.ui.screens.review import ReviewScreen
from agentmeter_tui.ui.widgets.transcript_view import TranscriptView

from .conftest import SIZE, make_app, settle, text_of


async def open_review(pilot, trial: int | None = None) -> ReviewScreen:
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, ReviewScreen)
    if trial is not None and screen.trial_id != trial:
        screen.open(trial)
        await settle(pilot)
    assert screen.detail is not None
    return screen


async def test_opens_on_the_first_unscored_trial(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)
        assert screen.trial_id == 4  # 1, 2, 3 are scored in the sample
        view = screen.query_one(TranscriptView)
        assert len(view.doc) == 40 and view.doc.height >= 40
        title = str(screen.query_one("#review-title").render())
        assert "#4" in title and "5 scored" in title and "alice" in title


async def test_score_keys_commit_before_showing_saved(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)
        await pilot.press("2")
        await settle(pilot)
        panel = str(screen.query_one("#score-panel").render())
        assert "saved" in panel and "alice" in panel
        with _closing(Store(sample_db)) as store:
            rows = store.reviews.score_history(4)
        assert [(r.score, r.reviewer) for r in rows] == [(2, "alice")] and rows[0].created_at
        for key, score in (("0", 0), ("1", 1), ("3", 3)):
            await pilot.press(key)
            await settle(pilot)
        with _closing(Store(sample_db)) as store:
            assert [r.score for r in store.reviews.score_history(4)] == [2, 0, 1, 3]  # append-only history
        assert "history 2 → 0 → 1 → 3" in str(screen.query_one("#score-panel").render())


async def test_a_failed_write_never_shows_saved(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)

        def broken(store, *args):
            raise RuntimeError("disk full")

        real_call = app.session.store.call

        async def failing(fn, *args):
            if getattr(fn, "__name__", "") == "<lambda>":
                return broken(None)
            return await real_call(fn, *args)

        app.session.store.call = failing  # type: ignore[method-assign]
        await pilot.press("3")
        await settle(pilot)
        panel = str(screen.query_one("#score-panel").render())
        assert "saved" not in panel and "not scored" in panel


async def test_note_dialog_saves_a_note(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)
        await pilot.press("n")
        assert isinstance(app.screen, NoteDialog)
        await pilot.press(*"looped on ls")
        await pilot.press("ctrl+s")
        await settle(pilot, screen)
        with _closing(Store(sample_db)) as store:
            notes = list(store.db.query("select * from notes where trial_id = 4"))
        assert [(n["text"], n["author"]) for n in notes] == [("looped on ls", "alice")]
        assert "looped on ls" in str(screen.query_one("#score-panel").render())


async def test_note_dialog_escape_saves_nothing(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        await open_review(pilot)
        await pilot.press("n", "x", "escape")
        await settle(pilot)
        with _closing(Store(sample_db)) as store:
            assert store.db.execute("select count(*) from notes").fetchone()[0] == 0


async def test_next_unscored_and_previous(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)
        assert screen.trial_id == 4
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.trial_id == 5
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.trial_id == 6
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert screen.trial_id == 5
        screen.open(8)
        await settle(pilot)
        await pilot.press("right_square_bracket")  # 9 and 10 are scored
        await settle(pilot)
        assert screen.trial_id == 11


async def test_cursor_keys_and_folding(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)
        view = screen.query_one(TranscriptView)
        doc = view.doc
        await pilot.press("down", "down", "down", "down")
        assert view.cursor == 4 and doc.index.kinds[4] == "tool_call"
        await pilot.press("down")
        result = view.cursor
        assert doc.index.kinds[result] == "tool_result" and not doc.is_open(result)
        height = doc.height
        await pilot.press("space")
        assert doc.is_open(result) and doc.height > height
        await pilot.press("enter")
        assert not doc.is_open(result) and doc.height == height
        await pilot.press("z")
        assert doc.height == len(doc)  # everything folded to one line
        await pilot.press("z")
        assert doc.height == height
        await pilot.press("end")
        assert view.cursor == len(doc) - 1
        await pilot.press("home")
        assert view.cursor == 0
        await pilot.press("pagedown")
        assert view.cursor > 0
        await pilot.press("pageup")
        assert view.cursor == 0
        await pilot.press("up")
        assert view.cursor == 0


async def test_e_jumps_to_failed_tool_calls_and_back(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)
        view = screen.query_one(TranscriptView)
        failures = sorted(view.doc.index.failures)
        assert failures, "the sample transcript has failed tool calls"
        await pilot.press("e")
        assert view.cursor == failures[0] and view.doc.is_open(failures[0])  # unfolded to be read
        await pilot.press("e")
        assert view.cursor == failures[1]
        await pilot.press("E")
        assert view.cursor == failures[0]


async def test_search_jumps_between_matches(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot)
        view = screen.query_one(TranscriptView)
        await pilot.press("slash")
        await pilot.press(*"line 0")
        await pilot.press("enter")
        await settle(pilot)
        first = view.cursor
        assert "line 0" in view.doc.index.texts[first]
        assert view.needle == "line 0"
        await pilot.press("escape")  # closes the search bar, keeps the highlight
        assert view.has_focus
        await pilot.press("f3")
        await settle(pilot)
        second = view.cursor
        assert second > first and "line 0" in view.doc.index.texts[second]
        await pilot.press("shift+f3")
        await settle(pilot)
        assert view.cursor == first


async def test_side_panels_show_verdict_usage_and_the_cell(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot, trial=9)
        usage = str(screen.query_one("#usage-panel").render())
        assert "passed" in usage and "cache" in usage and "$" in usage
        assert "count is right" in text_of(screen.query_one("#verdict-panel"))
        cell = str(screen.query_one("#cell-title").render())
        assert "median 3 of 2 scored" in cell or "median" in cell
        siblings = screen.query_one("#siblings")
        assert siblings.row_count == 2


class _closing:
    def __init__(self, store: Store):
        self.store = store

    def __enter__(self) -> Store:
        return self.store

    def __exit__(self, *exc) -> None:
        self.store.close()


async def test_a_differential_funnel_shows_rates_and_failing_cases_side_by_side(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_review(pilot, trial=17)
        shown = text_of(screen.query_one("#verdict-panel"))
        assert "Fuzzy" in shown and "50.0%" in shown  # the funnel
        assert "set-get" in shown and "list" in shown  # per-class rates
        assert "oracle (exit 0)" in shown and "candidate (exit 2)" in shown  # both stdouts
        assert "unknown flag --json" in shown
