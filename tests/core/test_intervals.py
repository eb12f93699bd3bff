"""Bootstrap intervals against an independent computation: the resampling written out by hand with
numpy's generator on the same seed (tasks drawn within each tier, tiers in the order easy, medium,
hard, as the report's method says), each resample scored with the paper's formulas from
``metrics.ams`` on plain lists of runs, and the percentile taken with ``np.quantile``. Nothing of
``metrics.intervals`` is used for the expected figures."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from agentmeter_tui.core.metrics.ams import TABLE1, agentmeter_score, tier_stats
from agentmeter_tui.core.metrics.runs import Run, select_runs
from agentmeter_tui.core.reporting import build_report
from agentmeter_tui.core.reporting.render import render_csv, render_json, render_markdown
from agentmeter_tui.core.vocab import TIERS

CONFIGS = [("m1", "a"), ("m1", "b"), ("m2", "a"), ("m2", "b")]
TASKS = {f"{tier[0]}{n}": tier for tier in TIERS for n in range(4)}
SEED, RESAMPLES = 11, 300


def _runs() -> list[Run]:
    """Two trials per cell, outcomes and costs spread so that intervals have width and ranks move."""
    rng = np.random.default_rng(3)
    runs = []
    for k, (model, cli) in enumerate(CONFIGS):
        for task, tier in TASKS.items():
            for trial in (1, 2):
                ok = rng.random() < 0.35 + 0.15 * k
                cost = float(np.round(rng.gamma(2.0, {"easy": 0.03, "medium": 0.12, "hard": 0.6}[tier]), 4))
                runs.append(Run(task, model, cli, trial=trial, status="passed" if ok else "failed", passed=ok,
                                quality=1.0 if ok else float(np.round(rng.random() * 0.5, 2)),
                                raw_tokens=int(cost * 1e6), cost=cost, finished_at=f"2026-11-01T00:0{trial}"))
    return runs


def _by_hand(runs: list[Run]) -> dict:
    selected = select_runs(runs, "latest")
    strata = [[t for t, g in TASKS.items() if g == tier] for tier in TIERS]
    rng = np.random.default_rng(SEED)
    draws = [rng.integers(0, len(s), (RESAMPLES, len(s))) for s in strata]  # one stratum after another
    out = {c: {"passes": [], "usd": [], "ams": []} for c in CONFIGS}
    for r in range(RESAMPLES):
        tasks_by_tier = [[strata[k][i] for i in draws[k][r]] for k in range(len(TIERS))]
        every = [t for tier_tasks in tasks_by_tier for t in tier_tasks]
        for c in CONFIGS:
            chosen = [selected[(c, t)] for t in every if (c, t) in selected]
            attempts = [run for t in every for run in runs if run.config == c and run.task == t]
            passes = sum(run.success for run in chosen)
            attempt_passes = sum(run.success for run in attempts)
            cost = sum(run.cost for run in attempts)
            scores = {tier: tier_stats([selected[(c, t)] for t in tier_tasks if (c, t) in selected],
                                       len(tier_tasks), TABLE1[tier]).score
                      for tier, tier_tasks in zip(TIERS, tasks_by_tier, strict=True)}
            out[c]["passes"].append(passes)
            out[c]["usd"].append(cost / attempt_passes if attempt_passes else np.inf)
            out[c]["ams"].append(agentmeter_score(scores))
    return out


def test_intervals_equal_a_hand_written_bootstrap():
    runs = _runs()
    report = build_report(runs, suite="s", task_tiers=TASKS, resamples=RESAMPLES, seed=SEED)
    hand = _by_hand(runs)
    iv = report.intervals
    for c in CONFIGS:
        for name, key in (("passes", "passes"), ("usd_per_pass", "usd"), ("ams", "ams")):
            low, high = np.quantile(np.array(hand[c][key], dtype=float), [0.025, 0.975])
            assert iv.bounds[name][c].low == pytest.approx(low, rel=1e-12, abs=1e-12), (c, name)
            expected_high = None if not np.isfinite(high) else high
            assert iv.bounds[name][c].high == pytest.approx(expected_high, rel=1e-12, abs=1e-12), (c, name)
    ams = np.array([hand[c]["ams"] for c in CONFIGS])
    for n, c in enumerate(CONFIGS):
        assert iv.first[c] == pytest.approx(np.mean(ams[n] == ams.max(axis=0)))
        above = (ams > ams[n]).sum(axis=0)
        assert iv.top3[c] == pytest.approx(np.mean(above < 3))
    a, b = CONFIGS[3], CONFIGS[0]
    diff = ams[3] - ams[0]
    comparison = iv.compare(a, b)
    assert comparison.difference.low == pytest.approx(np.quantile(diff, 0.025))
    assert comparison.difference.high == pytest.approx(np.quantile(diff, 0.975))
    assert comparison.a_ahead == pytest.approx(np.mean(diff > 0))
    # the point estimates sit inside their intervals
    for row in report.configurations:
        assert iv.bounds["ams"][row.config].low <= row.ams <= iv.bounds["ams"][row.config].high
        assert iv.bounds["passes"][row.config].low <= row.passes <= iv.bounds["passes"][row.config].high


def test_a_report_with_intervals_is_reproducible_byte_for_byte():
    runs = _runs()
    texts = []
    for _ in range(2):
        report = build_report(runs, suite="s", task_tiers=TASKS, resamples=RESAMPLES, seed=SEED)
        texts.append((render_markdown(report), render_csv(report), render_json(report)))
    assert texts[0] == texts[1]
    markdown, csv_text, json_text = texts[0]
    assert "## Intervals" in markdown and f"{RESAMPLES} resamples, seed {SEED}" in markdown
    assert "P_first" in csv_text
    data = orjson.loads(json_text)["intervals"]
    assert data["resamples"] == RESAMPLES and len(data["configurations"]) == len(CONFIGS)
    other = build_report(runs, suite="s", task_tiers=TASKS, resamples=RESAMPLES, seed=SEED + 1)
    assert render_json(other) != json_text  # the seed matters, so stating it matters


def test_no_resamples_no_intervals_and_the_report_is_unchanged():
    runs = _runs()
    plain = build_report(runs, suite="s", task_tiers=TASKS)
    assert plain.intervals is None
    assert "intervals" not in orjson.loads(render_json(plain))
    assert "## Intervals" not in render_markdown(plain)


def test_deferred_intervals_are_the_same_once_settled():
    """A site defers the bootstrap to overlap it with its workers: settled, the report is the same."""
    runs = _runs()
    now = build_report(runs, suite="s", task_tiers=TASKS, resamples=RESAMPLES, seed=SEED)
    later = build_report(runs, suite="s", task_tiers=TASKS, resamples=RESAMPLES, seed=SEED, defer_intervals=True)
    assert later.intervals is None and later.pending is not None
    assert render_json(later.settle()) == render_json(now) and later.pending is None
    assert later.settle().intervals is not None  # settling twice computes nothing more
