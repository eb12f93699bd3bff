"""The Textual-free parts of the UI: formatting, the live and grid models, the transcript
layout, the store queries, theme files and settings."""

from __future__ import annotations

from itertools import accumulate

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.ui import data
from agentmeter_tui.ui import format as fmt
from agentmeter_tui.ui.grid_state import GridState, TrialSummary
from agentmeter_tui.ui.live_state import LiveState
from agentmeter_tui.ui.settings import UiSettings, load_settings, reviewer_name
from agentmeter_tui.ui.themes import load_themes
from agentmeter_tui.ui.transcript_doc import TranscriptDoc
from agentmeter_tui.ui.wrapping import wrap_line, wrap_text
from tests.sample_data import T0, sample_feed, sample_meter


def test_formats():
    assert [fmt.tokens(v) for v in (0, 999, 1234, 56_789, 1_234_567, None)] == ["0", "999", "1.2k", "56.8k", "1.2M", "—"]
    assert [fmt.usd(v) for v in (None, 0, 0.0042, 0.123, 12.5, 1234)] == ["unpriced", "$0", "$0.0042", "$0.123",
                                                                          "$12.50", "$1,234"]
    assert fmt.duration(3725) == "1:02:05" and fmt.duration(65) == "1:05"
    assert fmt.bar(0.5, 4) == "██  " and fmt.bar(1.5, 3) == "███" and len(fmt.bar(0.33, 7)) == 7
    assert fmt.event_summary("tool_result", "a\nb\nc") == "a  (+2 lines)"
    assert fmt.event_summary("tool_call", "cat <<EOF\nx\nEOF") == "cat <<EOF …"
    assert fmt.event_summary("tool_result", "") == "(no output)"


def test_live_model_applies_snapshot_and_ticks_without_double_counting():
    live = LiveState(clock=lambda: T0)
    snapshot, _, tick = sample_feed(count=3, events=10)
    summary = live.apply(snapshot)
    assert summary.started == {1000, 1001, 1002} and live.connected
    summary = live.apply(tick)
    assert summary.events == 30 and live.trials[1000].last_seq == 10
    assert live.apply(tick).events == 0  # the same events again are ignored
    assert [r[0] for r in live.trials[1000].since(7)] == [8, 9, 10]
    done = dict(tick["meters"][0], status="passed")
    summary = live.apply({"type": "tick", "ts": T0 + 5, "meters": [], "events": {}, "finished": [done]})
    assert summary.finished == [done] and [t.id for t in live.running()] == [1001, 1002]
    live.forget(1000)
    assert 1000 not in live.trials
    live.apply({"type": "finished", "status": "stopped", "progress": {"done": 1}})
    assert live.ended == "stopped" and live.progress == {"done": 1}


def test_events_the_feed_left_out_are_said_in_the_tail():
    """A trial printing faster than a pane shows: the feed sends its newest events and how many
    it skipped (JSON keys are strings); the tail says so where they were, in the place of the last."""
    live = LiveState(clock=lambda: T0)
    snapshot, _, tick = sample_feed(count=1, events=10)
    live.apply(snapshot)
    rows = tick["events"][1000][-3:]  # seqs 8-10; 1-7 left out
    live.apply({"type": "tick", "ts": T0, "meters": [], "finished": [], "events": {"1000": rows},
                "skipped": {"1000": 7}})
    tail = live.trials[1000].since(0)
    assert [r[0] for r in tail] == [7, 8, 9, 10]
    assert tail[0][2] == "status" and "7 events not shown live" in tail[0][4] and "stored" in tail[0][4]


def test_burn_rate_is_fresh_tokens_and_dollars_per_minute():
    live = LiveState()
    first = sample_meter(1, "ace", "reference", "t", 1, fraction=0.1)
    later = sample_meter(1, "ace", "reference", "t", 1, fraction=0.2)
    live.apply({"type": "tick", "ts": 100.0, "meters": [first], "events": {}, "finished": []})
    live.apply({"type": "tick", "ts": 130.0, "meters": [later], "events": {}, "finished": []})
    tokens_per_min, usd_per_min = live.trials[1].burn()
    fresh = fmt.meter_fresh(later) - fmt.meter_fresh(first)
    assert tokens_per_min == pytest.approx(fresh * 2)
    assert usd_per_min == pytest.approx((later["cost_usd"] - first["cost_usd"]) * 2)
    assert live.trials[1].elapsed(135.0) == pytest.approx(later["elapsed"] + 5)


def test_grid_model_counts_cells_and_marks_only_touched_cells_dirty(sample_db):
    store = Store(sample_db)
    grid = GridState(["ace", "dud"], ["reference"], per_cell_total=6)
    grid.load(data.grid_rows(store, "sample"))
    store.close()
    assert grid.cell(("ace", "reference")).passes == 6
    dud = grid.cell(("dud", "claude-code"))
    assert (dud.done, dud.errored) == (6, 2)
    assert "claude-code" in grid.clis and grid.shape_changed  # a CLI seen in the data joins the grid
    grid.take_dirty()
    version = grid.finished_version
    grid.apply_meters([sample_meter(900, "ace", "reference", "count-lines", 3)])
    assert grid.take_dirty() == {("ace", "reference")} and grid.cell(("ace", "reference")).running == 1
    grid.upsert(TrialSummary(900, "ace", "reference", "count-lines", 3, "passed", None, 10, 0.1))
    assert grid.finished_version == version + 1 and grid.cell(("ace", "reference")).passes == 7
    grid.set_ams({("ace", "reference"): 0.5})
    assert grid.take_dirty() == {("ace", "reference")}
    grid.set_ams({("ace", "reference"): 0.5})
    assert grid.take_dirty() == set()


def test_wrapping():
    assert wrap_line("one two three four", 9) == ["one two", "three", "four"]
    assert wrap_line("x" * 20, 8) == ["x" * 8, "x" * 8, "xxxx"]
    assert wrap_text("a\n\nb", 10) == ["a", "", "b"]


def test_transcript_layout_folds_and_locates(sample_db):
    store = Store(sample_db)
    index = data.event_index(store, 4)
    store.close()
    doc = TranscriptDoc(index, width=30)
    assert len(doc) == 40
    assert doc.offsets == [0, *accumulate(doc.heights)]
    long_assistant = next(i for i, (k, t) in enumerate(zip(index.kinds, index.texts)) if k == "assistant" and len(t) > 30)
    assert doc.heights[long_assistant] > 1  # wrapped
    result = index.kinds.index("tool_result")
    assert doc.heights[result] == 1 and not doc.is_open(result)
    doc.toggle(result)
    assert doc.heights[result] == len(doc.lines(result)) > 1
    assert doc.offsets == [0, *accumulate(doc.heights)]
    for y in range(doc.height):
        i, line = doc.locate(y)
        assert doc.offsets[i] + line == y
    assert doc.locate(doc.height) is None
    doc.fold_all(True)
    assert doc.height == len(doc)
    doc.layout(80)
    assert doc.offsets == [0, *accumulate(doc.heights)]


def test_event_index_keeps_long_texts_cut_and_finds_failures(tmp_path):
    store = Store(tmp_path / "s.db")
    store.db["events"].insert_all([
        {"trial_id": 1, "seq": 1, "ts": 0, "kind": "tool_result", "stream": "stdout", "text": "x" * 10_000,
         "data": '{"type": "tool_result", "exit_code": 0}'},
        {"trial_id": 1, "seq": 2, "ts": 0, "kind": "tool_result", "stream": "stdout", "text": "boom",
         "data": '{"exit_code": 2}'},
        {"trial_id": 1, "seq": 3, "ts": 0, "kind": "tool_result", "stream": "stdout", "text": "bad",
         "data": '{"is_error": true}'},
        {"trial_id": 1, "seq": 4, "ts": 0, "kind": "raw", "stream": "stdout", "text": "not json", "data": "not json"},
        {"trial_id": 1, "seq": 5, "ts": 0, "kind": "error", "stream": "stdout", "text": "HTTP 500", "data": None},
    ])
    index = data.event_index(store, 1)
    assert index.full == [False, True, True, True, True] and len(index.texts[0]) == data.KEEP_CHARS
    assert index.failures == {1, 2, 4}
    assert data.event_text(store, 1, 1) == "x" * 10_000
    assert data.search_events(store, 1, "HTTP", 0) == 5
    assert data.search_events(store, 1, "boom", 5, backwards=True) == 2
    assert data.search_events(store, 1, "nothing", 0) is None
    store.close()


def test_review_queue_and_detail(sample_db):
    store = Store(sample_db)
    queue = data.review_queue(store, "sample")
    assert queue[:4] == [(1, True), (2, True), (3, True), (4, False)] and len(queue) == 48
    detail = data.trial_detail(store, 17)
    assert detail.extra["verifier"]["kind"] == "differential" and detail.events == 40
    assert [s["id"] for s in detail.siblings] == [17, 41]
    assert data.tail_events(store, 4, 3)[-1][0] == 40
    overview = data.overview(store)
    assert overview.models == ["ace", "guzzler", "dud", "parrot"] and overview.per_cell_total == 6
    store.close()


def test_theme_files_load_and_a_broken_one_is_reported(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text('name = "mine"\nprimary = "#336699"\n[variables]\nstatus-running = "#00ff00"\n')
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "broken"\nprimary = "#336699"\n[variables]\nstatus-runing = "#00ff00"\n')
    worse = tmp_path / "worse.toml"
    worse.write_text('name = "worse"\nprimary = "not a colour"\n')
    themes, errors = load_themes([tmp_path])
    assert [t.name for t in themes] == ["mine"] and themes[0].variables == {"status-running": "#00ff00"}
    assert any("bad.toml:4" in e and "status-runing" in e for e in errors)
    assert any("worse.toml:2" in e and "primary" in e for e in errors)


def test_the_shipped_themes_are_valid():
    themes, errors = load_themes()
    names = {t.name for t in themes}
    assert errors == [] and {"agentmeter-dark", "agentmeter-light"} <= names
    assert any(t.dark for t in themes) and any(not t.dark for t in themes)


def test_settings_and_reviewer(tmp_path, monkeypatch):
    path = tmp_path / "ui.toml"
    path.write_text('reviewer = "bob"\ntheme = "agentmeter-light"\nkeymap = { kill = "ctrl+k" }\n')
    settings, error = load_settings(path)
    assert error is None and settings.keymap == {"kill": "ctrl+k"}
    monkeypatch.delenv("AGENTMETER_REVIEWER", raising=False)
    assert reviewer_name(settings) == "bob"
    monkeypatch.setenv("AGENTMETER_REVIEWER", "carol")
    assert reviewer_name(settings) == "carol"
    path.write_text('reviewr = "typo"\n')
    settings, error = load_settings(path)
    assert settings == UiSettings() and "ui.toml:1" in error and "reviewr" in error


def test_streamed_assistant_deltas_read_as_one_text(tmp_path):
    """Gemini CLI prints a message as many small deltas: the review reads them as one entry,
    and jumping to any of their seqs lands on it."""
    from agentmeter_tui.core.store import Store
    from agentmeter_tui.ui import data
    from agentmeter_tui.ui.transcript_doc import TranscriptDoc

    store = Store(tmp_path / "d.db")
    store.db["trials"].insert({"id": 1, "suite_id": "s", "task_id": "t", "model": "m", "cli": "gemini-cli",
                               "trial_index": 1, "status": "passed"})
    rows = [(1, "tool_call", "ls"), (2, "assistant", "Done: count"), (3, "assistant", ".txt holds 7"),
            (4, "assistant", ", the count."), (5, "assistant", "Next I stop."), (6, "tool_result", "ok")]
    store.db["events"].insert_all({"trial_id": 1, "seq": q, "ts": 0.0, "kind": k, "stream": "stdout", "text": t}
                                  for q, k, t in rows)
    index = data.event_index(store, 1)
    assert index.kinds == ["tool_call", "assistant", "tool_result"]
    assert index.texts[1] == "Done: count.txt holds 7, the count.\nNext I stop."
    doc = TranscriptDoc(index, 80)
    assert doc.position_of_seq(4) == 1 and doc.position_of_seq(6) == 2


def test_live_tail_grows_a_streamed_message_in_place():
    from agentmeter_tui.ui.widgets.tail import TranscriptTail

    tail = TranscriptTail()
    tail.write_events([[1, 0, "tool_call", "stdout", "ls"], [2, 0, "assistant", "stdout", "lines p"]])
    tail.write_events([[3, 0, "assistant", "stdout", "er file."], [4, 0, "usage", "stdout", "in 1"]])
    texts = [line for _, line, _ in tail._lines]
    assert texts[1] == "lines per file." and len(texts) == 3
