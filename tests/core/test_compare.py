"""Side by side: steps, tokens per step and running totals, the first divergence, repeated calls
and re-read files; the paper's example (369K tokens passing beside 4.78M tokens failing after 30
reads of one file) reads at a glance in the compare screen's summaries."""

from __future__ import annotations

import orjson

from agentmeter_tui.core.review.compare import build_steps, compare_trials, first_divergence, read_path
from tests.sample_data import _insert_events, build_sample_store


def call(seq: int, command: str) -> tuple:
    data = orjson.dumps({"type": "tool_call", "name": "shell", "arguments": {"command": command}}).decode()
    return (seq, "tool_call", command, data)


def result(seq: int) -> tuple:
    return (seq, "tool_result", "out", None)


def test_read_path_shapes():
    assert read_path("cat src/stats.py", None) == "src/stats.py"
    assert read_path("sed -n 1,40p stats.py", None) == "stats.py"
    assert read_path("head -n 20 notes.md", None) == "notes.md"
    assert read_path("cat 'notes.md'", None) == "notes.md"
    assert read_path("python -m pytest", None) is None
    claude = orjson.dumps({"name": "Read", "input": {"file_path": "/w/stats.py"}}).decode()
    assert read_path("Read /w/stats.py", claude) == "/w/stats.py"
    gemini = orjson.dumps({"name": "read_file", "args": {"absolute_path": "/w/x.py"}}).decode()
    assert read_path("read_file", gemini) == "/w/x.py"


def test_steps_tokens_divergence_and_repeats():
    left_rows = [(1, "assistant", "Look first.", None), call(2, "ls"), result(3), call(5, "cat a.py"), result(6),
                 (8, "assistant", "Done.", None)]
    right_rows = [(1, "assistant", "Look first.", None), call(2, "ls"), result(3), call(5, "cat b.py"), result(6),
                  call(8, "cat b.py"), result(9), (11, "error", "HTTP 500", None)]
    left = build_steps({"id": 1}, left_rows, [(4, 100), (7, 50), (9, 5)], set())
    right = build_steps({"id": 2}, right_rows, [(4, 100), (7, 70), (10, 70)], {9})
    assert [s.label for s in left.steps] == ["ls", "cat a.py", "Done."]
    assert [(s.tokens, s.total) for s in left.steps] == [(100, 100), (50, 150), (5, 155)]
    assert left.total_tokens == 155 and right.total_tokens == 240
    assert [s.kind for s in right.steps] == ["tool", "tool", "tool", "error"]
    assert right.steps[2].repeat == 2 and right.steps[2].read_repeat == 2 and right.steps[2].failed
    assert right.repeated_calls == 1 and right.most_read == ("b.py", 2)
    assert first_divergence(left.steps, right.steps) == 1
    assert first_divergence(left.steps, left.steps) is None


def test_paper_example_reads_at_a_glance(tmp_path):
    from agentmeter_tui.ui.screens.compare import side_summary

    store = build_sample_store(tmp_path / "p.db", events_per_trial=2, scores=False)
    try:
        row = dict(store.trial(1))
        row.pop("id")
        ids = []
        for cli, status in (("claude-code", "passed"), ("qwen-code", "failed")):
            ids.append(store.db["trials"].insert({**row, "cli": cli, "status": status}).last_pk)
        passing = [(1, 0.0, "tool_call", "stdout", c, None) for c in ("ls", "cat stats.py", "python -m pytest")]
        passing = [(i + 1, *r[1:]) for i, r in enumerate(passing)]
        failing = [(i + 1, 0.0, "tool_call", "stdout", "cat stats.py" if i % 2 else "python -m pytest", None)
                   for i in range(60)]
        with store.db.conn:
            _insert_events(store.db, ids[0], passing)
            _insert_events(store.db, ids[1], failing)
            # 369,000 tokens over 3 calls; 4,780,000 over 60.
            store.db.conn.executemany("insert into usage (trial_id, seq, source, uncached_input) values (?, ?, 'cli', ?)",
                                      [(ids[0], s, 123_000) for s in (1, 2, 3)]
                                      + [(ids[1], s, 79_666 + (s == 60) * 40) for s in range(1, 61)])
        comparison = compare_trials(store, *ids)
    finally:
        store.close()
    assert comparison.left.total_tokens == 369_000 and comparison.right.total_tokens == 4_780_000
    assert comparison.right.most_read == ("stats.py", 30)
    assert comparison.divergence == 0
    left, right = side_summary(comparison.left), side_summary(comparison.right)
    assert "369k" in left and "passed" in left
    assert "4.8M" in right and "failed" in right and "stats.py ×30" in right


def _shape(side):
    return ([(s.seq, s.kind, s.label, s.failed, s.read_path, s.tokens, s.total, s.repeat, s.read_repeat)
             for s in side.steps], side.total_tokens, side.repeated_calls, dict(side.reads), side.complete)


def test_reading_in_ranges_gives_the_steps_of_one_pass(tmp_path):
    """A million-event trial is compared a range of seqs at a time: every range size gives the
    same steps, tokens, totals, repeats and divergence as reading each trial whole. The trials
    mix messages streamed over several events, errors, failed results, re-reads and usage rows
    before the first event and after the last (they count in the first and last step)."""
    from agentmeter_tui.core.review.compare import open_comparison
    from tests.sample_data import transcript

    store = build_sample_store(tmp_path / "r.db", events_per_trial=2, scores=False)
    try:
        row = dict(store.trial(1))
        row.pop("id")
        ids = [store.db["trials"].insert({**row, "cli": cli}).last_pk for cli in ("claude-code", "qwen-code")]
        rows = transcript(400, 5, fail_every=4)
        streamed = [(900 + i, 0.0, "assistant", "stdout", f"part {i} of a streamed message", None) for i in range(5)]
        errors = [(950, 0.0, "error", "stderr", "HTTP 500", None), (951, 0.0, "tool_call", "stdout", "cat a.py", None)]
        with store.db.conn:
            _insert_events(store.db, ids[0], rows + streamed + errors)
            _insert_events(store.db, ids[1], transcript(420, 5, fail_every=4)[:-3] + streamed)
            store.db.conn.executemany("insert into usage (trial_id, seq, source, output) values (?, ?, ?, ?)",
                                      [(ids[0], -3, "cli", 7), (ids[0], 5000, "cli", 11), (ids[1], 0, "cli", 13),
                                       (ids[1], 3, "proxy", 1000), (ids[1], 300, "proxy", 2000)])
        whole = compare_trials(store, *ids, chunk=10**6)
        assert whole.right.total_tokens == 3000  # the proxy metered it: its rows only
        for chunk in (1, 2, 3, 7, 64, 399, 401):
            reader = open_comparison(store, *ids, chunk=chunk)
            reads = 1
            while reader.read_more(store):
                reads += 1
            assert reads >= 2 or chunk > 400
            ranged = reader.comparison
            assert _shape(ranged.left) == _shape(whole.left), chunk
            assert _shape(ranged.right) == _shape(whole.right), chunk
            assert ranged.divergence == whole.divergence, chunk
    finally:
        store.close()
    assert whole.left.steps[0].tokens >= 7 and whole.left.steps[-1].tokens >= 11  # the rows outside the events
    assert whole.left.steps[-2].kind == "error" and whole.left.steps[-3].kind == "message"
    assert whole.divergence is not None


def test_the_first_range_shows_before_the_rest_is_read(tmp_path):
    from agentmeter_tui.core.review.compare import open_comparison
    from tests.sample_data import transcript

    store = build_sample_store(tmp_path / "f.db", events_per_trial=2, scores=False)
    try:
        row = dict(store.trial(1))
        row.pop("id")
        ids = [store.db["trials"].insert({**row, "cli": cli}).last_pk for cli in ("claude-code", "qwen-code")]
        with store.db.conn:
            for trial_id in ids:
                _insert_events(store.db, trial_id, transcript(2000, 9))
        reader = open_comparison(store, *ids, chunk=100)
        first = reader.comparison
        assert not first.left.complete and 0 < len(first.left.steps) < 40
        assert first.divergence is None  # the same steps so far
        while reader.read_more(store):
            pass
    finally:
        store.close()
    assert first.left.complete and first.divergence is None and len(first.left.steps) > 400
