"""The review screen over a long transcript read a window at a time (``review_transcript``).

The windows are made small here (64 events) so a 3,000-event trial stands for a
million-event one: the same code paths, in a test's time. Expected seqs come from the rows
written, not from the index.
"""

from __future__ import annotations

import pytest

from agentmeter_tui.ui import transcript_doc
from agentmeter_tui.ui.screens import review_transcript
from agentmeter_tui.ui.widgets.transcript_view import TranscriptView
from tests.sample_data import T0, build_sample_store

from .conftest import SIZE, make_app, settle

EVENTS = 3000
NEEDLE = "zebra-needle-only-at-the-end"


@pytest.fixture
def long_db(tmp_path, monkeypatch):
    monkeypatch.setattr(review_transcript, "WINDOW", 64)
    monkeypatch.setattr(review_transcript, "WHOLE", 64)
    monkeypatch.setattr(transcript_doc, "MAX_CHUNKS", 4)
    path = tmp_path / "long.db"
    store = build_sample_store(path, events_per_trial=5, big_trial_events=EVENTS, scores=False)
    trial = store.db.execute("select max(id) from trials").fetchone()[0]
    # The last error and the only match of the needle are the trial's last two events.
    store.db["events"].insert_all([
        {"trial_id": trial, "seq": EVENTS + 1, "ts": T0 + 9999, "kind": "error", "stream": "stderr",
         "text": "fatal: the last error of the run"},
        {"trial_id": trial, "seq": EVENTS + 2, "ts": T0 + 9999, "kind": "assistant", "stream": "stdout",
         "text": f"Done. {NEEDLE}"}])
    store.close()
    return path, trial


async def open_long(pilot, trial):
    await settle(pilot)
    screen = pilot.app.screen
    screen.open(trial)
    await settle(pilot)
    view = screen.query_one(TranscriptView)
    assert screen.trial_id == trial and view.doc.windowed
    return screen, view


async def test_a_long_transcript_opens_on_its_first_window(long_db):
    path, trial = long_db
    app = make_app(path, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        _screen, view = await open_long(pilot, trial)
        doc = view.doc
        assert not doc.complete and set(doc.chunks) <= {0, 1}  # what is on screen, not the whole trial
        assert doc.index.seqs[0] == 1
        assert len(doc) >= EVENTS  # one slot per event of the windows not read yet


async def test_search_finds_a_match_at_the_very_end(long_db):
    path, trial = long_db
    app = make_app(path, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        _screen, view = await open_long(pilot, trial)
        await pilot.press("slash")
        await pilot.press(*NEEDLE)
        await pilot.press("enter")
        await settle(pilot)
        assert view.doc.index.seqs[view.cursor] == EVENTS + 2
        assert NEEDLE in view.doc.index.texts[view.cursor]
        assert len(view.doc.chunks) <= 4  # windows read on the way were not all kept


async def test_a_long_transcript_completes_the_search_index_and_searches_through_it(long_db, monkeypatch):
    """The store was written directly (nothing indexed, as an old store or an import): the screen
    indexes it in the background, and search then goes through the index (its scan fallback
    made unusable here) to the same match."""
    from agentmeter_tui.core.store import Store, search

    path, trial = long_db
    before = Store(path)
    assert before.search.search_backlog() > EVENTS
    before.close()
    monkeypatch.setattr(review_transcript, "INDEX_CHUNK", 500)  # several store calls
    app = make_app(path, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        _screen, view = await open_long(pilot, trial)
        await settle(pilot)

        def no_scan(*args):
            raise AssertionError("scanned although the index is complete")

        monkeypatch.setattr(search.SearchQueries, "_scan_events", no_scan)
        await pilot.press("slash")
        await pilot.press(*NEEDLE.upper())
        await pilot.press("enter")
        await settle(pilot)
        assert view.doc.index.seqs[view.cursor] == EVENTS + 2
    after = Store(path)
    assert after.search.search_backlog() == 0
    after.close()


async def test_end_then_previous_error_lands_on_the_last_error(long_db):
    path, trial = long_db
    app = make_app(path, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        _screen, view = await open_long(pilot, trial)
        await pilot.press("end")
        await settle(pilot)
        assert view.doc.index.seqs[view.cursor] == EVENTS + 2
        await pilot.press("E")
        await settle(pilot)
        assert view.doc.index.seqs[view.cursor] == EVENTS + 1
        assert view.doc.index.kinds[view.cursor] == "error" and view.doc.is_open(view.cursor)
        await pilot.press("home")
        await settle(pilot)
        await pilot.press("e")  # from the top, the first failed tool call (the sample's 9th turn)
        await settle(pilot)
        assert view.doc.index.kinds[view.cursor] == "tool_result"
        assert view.cursor in view.doc.index.failures


async def test_folding_and_cursor_cross_window_edges(long_db):
    path, trial = long_db
    app = make_app(path, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        _screen, view = await open_long(pilot, trial)
        doc = view.doc
        last_of_first = len(doc.chunks[0].heights) - 1
        view.show_event(last_of_first)
        await pilot.press("down")
        await settle(pilot)
        assert view.cursor == 64 and doc.index.seqs[view.cursor] > doc.index.seqs[last_of_first]
        await pilot.press("up")
        assert view.cursor == last_of_first  # the empty slots at a window's end are skipped
        result = next(i for i in range(64, 64 + len(doc.chunks[1].heights))
                      if doc.index.kinds[i] == "tool_result" and "\n" in doc.index.texts[i])
        view.show_event(result)
        height = doc.height
        assert not doc.is_open(result) and doc.heights[result] == 1
        await pilot.press("space")
        assert doc.is_open(result) and doc.height == height + doc.heights[result] - 1 > height
        await pilot.press("z")
        assert all(not doc.is_open(i) for i in range(64, 64 + len(doc.chunks[1].heights)))
