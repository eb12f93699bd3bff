"""A trial flooded with lines (an agent printing as fast as it can, through the real runner)
opens in review afterwards: the transcript holds one slot per stored event, its top is the
first line printed, and ``end`` lands on the last. Counts, not times (benchmarks/flood.py
times it)."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.ui.widgets.transcript_view import TranscriptView
from tests.conftest import agentmeter
from tests.core.test_flood import flood_accounting, flood_suite

from .conftest import SIZE, make_app, settle

pytestmark = pytest.mark.slow


async def test_a_flooded_trial_opens_in_review_whole(tmp_path):
    db = tmp_path / "flood.db"
    result = agentmeter("run", str(flood_suite(tmp_path, 2)), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr
    store = Store(db)
    try:
        (trial,) = store.trials("hostile")
        said, flood, _ = flood_accounting(store, trial["id"])
        events = store.event_count(trial["id"])
        last_seq = max(seq for seq, *_ in store.events(trial["id"], start=events - 5))
    finally:
        store.close()
    assert len(flood) == said >= 4096

    app = make_app(db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = pilot.app.screen
        screen.open(trial["id"])
        await settle(pilot)
        view = screen.query_one(TranscriptView)
        assert screen.trial_id == trial["id"]
        assert len(view.doc) >= events and view.doc.index.seqs[0] == 1  # a slot per stored event
        await pilot.press("end")
        await settle(pilot)
        assert view.doc.index.seqs[view.cursor] == last_seq == events
