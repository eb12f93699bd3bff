"""Side by side: steps, tokens per step and running totals, the first divergence, repeated calls
and re-read files; the paper's example (369K tokens passing beside 4.78M tokens failing after 30
reads of one file) reads at a glance in the compare screen's summaries."""

from __future__ import annotations

import orjson

from agentmeter_tui.core.compare import build_steps, compare_trials, first_divergence, read_path
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
