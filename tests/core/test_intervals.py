"""Two-level bootstrap intervals against an independent computation: the resampling written out by
hand with numpy's generator on the same seed (tasks drawn within each tier, tiers in the order easy,
medium, hard, then each cell's trials drawn within each drawn task, configurations in report order,
as the report's method says), each resample scored with the paper's formulas (SR, CBQ over the grid,
EFR, Eq. 7 and 8) written here on plain lists, and the percentile taken with ``np.quantile``.
Nothing of ``metrics.intervals`` is used for the expected figures."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from agentmeter_tui.core.metrics.ams import TABLE1
from agentmeter_tui.core.metrics.attempts import Attempt
from agentmeter_tui.core.reporting import build_report
from agentmeter_tui.core.reporting.render import render_csv, render_json, render_markdown
from agentmeter_tui.core.vocab import TIERS

CONFIGS = [("m1", "a"), ("m1", "b"), ("m2", "a"), ("m2", "b")]
TASKS = {f"{tier[0]}{n}": tier for tier in TIERS for n in range(4)}
SEED, RESAMPLES = 11, 300


def _runs() -> list[Attempt]:
    """Two or three trials per cell, outcomes and costs spread so that intervals have width and ranks move."""
    rng = np.random.default_rng(3)
    runs = []
    for k, (model, cli) in enumerate(CONFIGS):
        for n, (task, tier) in enumerate(TASKS.items()):
            for trial in range(1, 3 + (n + k) % 2):
                ok = rng.random() < 0.35 + 0.15 * k
                cost = float(np.round(rng.gamma(2.0, {"easy": 0.03, "medium": 0.12, "hard": 0.6}[tier]), 4))
                runs.append(Attempt(task, model, cli, trial=trial, status="passed" if ok else "failed", passed=ok,
                                quality=1.0 if ok else float(np.round(rng.random() * 0.5, 2)),
                                raw_tokens=int(cost * 1e6), cost=cost, finished_at=f"2026-11-01T00:0{trial}"))
    return runs


def _score(trials_by_task: list[list[Attempt]], tier: str, alpha: float = 0.6) -> float:
    """Eq. 3-7 with each task's value the mean over its (drawn) trials."""
    budget = TABLE1[tier]
    sr = np.mean([np.mean([r.reward for r in ts]) for ts in trials_by_task])
    cbq = [np.mean([np.mean([r.reward * (r.success and r.cost <= b) for r in ts]) for ts in trials_by_task])
           for b in budget.grid]
    efr = np.mean([np.mean([(not r.success and r.cost > budget.tau) for r in ts]) for ts in trials_by_task])
    return (alpha * sr + (1 - alpha) * np.mean(cbq)) * (1 - efr)


def _by_hand(runs: list[Attempt]) -> dict:
    cells = {(c, t): [r for r in runs if r.config == c and r.task == t] for c in CONFIGS for t in TASKS}
    slots = max(len(v) for v in cells.values())
    strata = [[t for t, g in TASKS.items() if g == tier] for tier in TIERS]
    rng = np.random.default_rng(SEED)
    draws = [rng.integers(0, len(s), (RESAMPLES, len(s))) for s in strata]  # one stratum after another
    trial_draws = {c: rng.random((RESAMPLES, len(TASKS), slots)) for c in CONFIGS}  # then per configuration
    out = {c: {"passes": [], "usd": [], "ams": []} for c in CONFIGS}
    for r in range(RESAMPLES):
        tasks_by_tier = [[strata[k][i] for i in draws[k][r]] for k in range(len(TIERS))]
        every = [t for tier_tasks in tasks_by_tier for t in tier_tasks]
        for c in CONFIGS:
            drawn = []
            for position, t in enumerate(every):
                trials = cells[(c, t)]
                u = trial_draws[c][r, position, :len(trials)]
                drawn.append([trials[math.floor(x * len(trials))] for x in u])
            out[c]["passes"].append(sum(np.mean([x.success for x in ts]) for ts in drawn))
            passes = sum(x.success for ts in drawn for x in ts)
            cost = sum(x.cost for ts in drawn for x in ts)
            out[c]["usd"].append(cost / passes if passes else np.inf)
            scores, start = [], 0
            for tier, tier_tasks in zip(TIERS, tasks_by_tier, strict=True):
                scores.append(_score(drawn[start:start + len(tier_tasks)], tier))
                start += len(tier_tasks)
            out[c]["ams"].append(np.mean(scores))
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
    assert comparison.b_ahead == pytest.approx(np.mean(diff < 0))
    # the every-trial estimates, by hand, sit inside their intervals
    for c in CONFIGS:
        trials = {t: [r for r in runs if r.config == c and r.task == t] for t in TASKS}
        ams = np.mean([_score([trials[t] for t in TASKS if TASKS[t] == tier], tier) for tier in TIERS])
        passes = sum(np.mean([r.success for r in ts]) for ts in trials.values())
        assert iv.estimates["ams"][c] == pytest.approx(ams) and iv.estimates["passes"][c] == pytest.approx(passes)
        assert iv.bounds["ams"][c].low <= ams <= iv.bounds["ams"][c].high
        assert iv.bounds["passes"][c].low <= passes <= iv.bounds["passes"][c].high


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


def test_one_trial_per_cell_gives_table_2_as_the_estimate():
    runs = [r for r in _runs() if r.trial == 1]
    report = build_report(runs, suite="s", task_tiers=TASKS, resamples=RESAMPLES, seed=SEED)
    for row in report.configurations:
        assert report.intervals.estimates["ams"][row.config] == pytest.approx(row.ams)
        assert report.intervals.estimates["passes"][row.config] == pytest.approx(row.passes)
        assert report.intervals.estimates["usd_per_pass"][row.config] == pytest.approx(row.usd_per_pass)


def test_too_few_tasks_say_so_instead_of_a_degenerate_range():
    runs = [r for r in _runs() if r.task in ("e0", "m0", "h0")]  # one task per tier
    report = build_report(runs, suite="s", task_tiers={"e0": "easy", "m0": "medium", "h0": "hard"},
                          resamples=RESAMPLES, seed=SEED)
    iv = report.intervals
    for c in CONFIGS:
        assert all(iv.bounds[s][c].too_few and iv.bounds[s][c].low is None for s in ("passes", "usd_per_pass", "ams"))
        assert iv.first[c] is None and iv.top3[c] is None
    text = render_markdown(report)
    assert text.count("too few tasks for an interval") >= 3 * len(CONFIGS)
    data = orjson.loads(render_json(report))["intervals"]["configurations"][0]
    assert data["ams"] == {"low": None, "high": None, "too_few_tasks": True}
    # 12 tasks but a tier of one task: Pass has an interval, AMS does not (that tier would look certain)
    tiers = dict(TASKS)
    for task in ("h1", "h2", "h3"):
        tiers[task] = None
    report = build_report(_runs(), suite="s", task_tiers=tiers, resamples=RESAMPLES, seed=SEED)
    c = CONFIGS[0]
    assert not report.intervals.bounds["passes"][c].too_few and report.intervals.bounds["ams"][c].too_few
