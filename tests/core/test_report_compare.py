"""`agentmeter report --compare A B` against computations written here: flips from each side's own
selected runs, mean rewards over every trial by hand, each side's AMS and Pass from its own report
(built alone), and the paired bootstrap's difference against the same identity the intervals test
checks by hand (`tests/core/test_intervals.py`: the combined table's resamples); identical sides
differ by exactly 0 in every resample."""

from __future__ import annotations

import orjson
import pytest

from agentmeter_tui.cli import main
from agentmeter_tui.core.metrics.attempts import select_attempts
from agentmeter_tui.core.reporting import build_report, attempt_from_record
from agentmeter_tui.core.reporting.compare import compare_runs, render_markdown
from agentmeter_tui.core.reporting.render import render
from agentmeter_tui.core.reporting.records import import_records
from agentmeter_tui.core.reporting.synthetic import synthetic_records
from agentmeter_tui.core.store import Store


def _side(seed: int, trials: int = 3):
    records = list(synthetic_records(models=2, clis=2, tasks=12, trials=trials, seed=seed, infra_rate=0.0))
    tiers = {}
    for r in records:
        tiers.setdefault(r.task, r.tier)
    return [attempt_from_record(r) for r in records], tiers, records


def test_flips_rewards_and_scores_match_each_side_alone():
    a, tiers, _ = _side(7)
    b, tiers_b, _ = _side(8)
    cmp = compare_runs(a, b, tiers, tiers_b, ("a", "b"), resamples=300, seed=5)
    alone = {side: build_report(runs, suite="s", task_tiers=tiers) for side, runs in (("a", a), ("b", b))}
    for change in cmp.configs:
        for n, side in enumerate("ab"):
            row = alone[side].configuration(*change.config)
            assert change.ams[n] == pytest.approx(row.ams) and change.passes[n] == row.passes
        assert not change.difference.too_few and change.difference.low <= change.estimate <= change.difference.high
        assert change.a_ahead + change.b_ahead <= 1.0 + 1e-12
    chosen = {side: select_attempts(runs) for side, runs in (("a", a), ("b", b))}
    flips = 0
    for cell in cmp.cells:
        passed = [chosen[s][(cell.config, cell.task)].success for s in "ab"]
        assert list(cell.passed) == passed
        flips += passed[0] != passed[1]
        for n, runs in enumerate((a, b)):
            rewards = [r.reward for r in runs if r.config == cell.config and r.task == cell.task and r.valid]
            assert cell.reward[n] == pytest.approx(sum(rewards) / len(rewards))
    assert flips == sum(c.flipped for c in cmp.cells) and flips > 0
    text = render_markdown(cmp)
    assert f"{flips} flip(s)" in text and text.count("**flip**") == flips


def test_a_run_against_itself_moves_by_nothing():
    """One trial per cell: the same tasks drawn for both sides give a difference of exactly 0. (With
    several trials each side's trials are drawn on their own, as two runs' are independent.)"""
    a, tiers, _ = _side(7, trials=1)
    cmp = compare_runs(a, a, tiers, tiers, ("a", "a"), resamples=200, seed=1)
    for change in cmp.configs:
        assert change.difference.low == 0.0 and change.difference.high == 0.0 and change.estimate == 0.0
        assert change.a_ahead == 0.0 and change.b_ahead == 0.0
    assert not any(c.flipped for c in cmp.cells)
    several, tiers, _ = _side(7)
    for change in compare_runs(several, several, tiers, tiers, ("a", "a"), resamples=200, seed=1).configs:
        assert change.estimate == 0.0 and change.difference.low <= 0.0 <= change.difference.high


def test_a_comparison_without_its_bootstrap_is_refused():
    """The comparison is the paired bootstrap: with no resamples there is none to read (it was an
    AttributeError on the report's missing intervals)."""
    a, tiers, _ = _side(7, trials=1)
    with pytest.raises(ValueError, match="positive number of resamples, not 0"):
        compare_runs(a, a, tiers, tiers, ("a", "a"), resamples=0)


def test_a_folder_format_is_no_text_to_render():
    a, tiers, _ = _side(7, trials=1)
    report = build_report(a, suite="s", task_tiers=tiers)
    with pytest.raises(ValueError, match="'html' writes a folder"):
        render(report, "html")
    assert render(report, "md").startswith("#")


def test_compare_command_two_stores(tmp_path, capsys):
    paths = []
    for seed in (7, 8):
        db = tmp_path / f"s{seed}.db"
        store = Store(db)
        import_records(store, _side(seed)[2])
        store.close()
        paths.append(str(db))
    assert main(["report", "--compare", *paths, "--format", "json", "--intervals", "200"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["tasks"] == 12 and len(data["configurations"]) == 4 and len(data["cells"]) == 48
    assert main(["report", "--compare", *paths, "--format", "csv"]) == 2
    assert main(["report", "--compare", paths[0], str(tmp_path / "none.db")]) == 1
