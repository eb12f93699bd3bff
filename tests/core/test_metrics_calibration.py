"""Tier calibration (seed 000 Eq. 1), budget grids and tau from a pool of runs."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.metrics import TABLE1, Attempt
from agentmeter_tui.core.metrics.calibration import (
    calibrate,
    cost_grid,
    failure_threshold,
    percentile_ranks,
    round_budget,
    split_thirds,
    task_efforts,
)


def run(task, status="passed", quality=None, tokens=100, turns=1, tools=1, cost=0.1, model="m", cli="c"):
    passed = status == "passed"
    quality = (1.0 if passed else 0.0) if quality is None else quality
    return Attempt(task, model, cli, 0, status, passed, quality, tokens, cost, 0, turns, tools)


# a: always solved, small; b: half solved (the failure with partial credit 0.5), medium;
# c: never solved, large. Tool calls order a < c < b, so the footprint term differs.
POOL = [
    run("a", tokens=100, turns=2, tools=1), run("a", tokens=300, turns=4, tools=3),
    run("b", tokens=1000, turns=10, tools=20), run("b", "failed", 0.5, tokens=3000, turns=10, tools=20),
    run("c", "failed", tokens=10000, turns=30, tools=5), run("c", "failed", tokens=10000, turns=30, tools=5),
    run("c", "infra-invalid", tokens=1, turns=0, tools=0),  # left out of the pool
]


def test_percentile_ranks_average_ties():
    assert percentile_ranks([10, 5, 5]) == [1.0, 0.5, 0.5]
    assert percentile_ranks([]) == []


def test_effort_scores_by_hand():
    efforts = {e.task: e for e in task_efforts(POOL)}
    a, b, c = efforts["a"], efforts["b"], efforts["c"]
    assert (a.pass_rate, a.mean_reward, a.median_tokens, a.median_turns, a.median_footprint) == (1, 1, 200, 3, 2)
    assert b.solvability == pytest.approx(0.7 * 0.5 + 0.3 * 0.75)
    assert c.runs == 2  # the infra-invalid attempt is not evidence
    assert a.effort == pytest.approx(0.25 / 3 + 0.10 / 3 + 0.10 / 3)
    assert b.effort == pytest.approx(0.55 * (1 - 0.575) + 0.25 * 2 / 3 + 0.10 * 2 / 3 + 0.10 * 1)
    assert c.effort == pytest.approx(0.55 + 0.25 + 0.10 + 0.10 * 2 / 3)


def test_split_into_equal_thirds():
    assert split_thirds({"x": 0.9, "y": 0.1, "z": 0.5}) == {"y": "easy", "z": "medium", "x": "hard"}
    tiers = split_thirds({f"t{i:02d}": i / 90 for i in range(90)})
    assert [sum(1 for g in tiers.values() if g == t) for t in ("easy", "medium", "hard")] == [30, 30, 30]
    ten = split_thirds({f"t{i}": float(i) for i in range(10)})
    assert [sum(1 for g in ten.values() if g == t) for t in ("easy", "medium", "hard")] == [3, 4, 3]
    tied = split_thirds({"b": 0.5, "a": 0.5, "c": 0.5})  # equal effort: by task id
    assert tied == {"a": "easy", "b": "medium", "c": "hard"}


def test_round_budget_like_table1():
    assert round_budget(3.4712) == 3.47
    assert round_budget(0.0149) == 0.01
    assert round_budget(0.004567) == 0.0046  # below a cent: two significant figures, never 0
    assert round_budget(0.0) == 0.0


def test_cost_grid_and_tau():
    costs = [i / 10 for i in range(1, 11)]
    assert cost_grid(costs, (0.1, 0.5, 0.9)) == (0.19, 0.55, 0.91)
    assert cost_grid([0.2] * 5) == (0.2,)  # duplicates merged
    assert cost_grid([]) == ()
    assert failure_threshold(costs) == 0.91
    assert failure_threshold([]) is None


def test_calibrate_derives_tiers_then_budgets_per_new_tier():
    result = calibrate(POOL, {"a": "hard", "b": None, "c": "easy"}, quantiles=(0.5,))
    assert result.tiers == {"a": "easy", "b": "medium", "c": "hard"}
    assert result.budgets["medium"].grid == (0.1,) and result.budgets["medium"].tau == 0.1
    assert result.derived["easy"] == (True, False)  # a never failed: Table 1's tau stays
    assert result.budgets["easy"].tau == TABLE1["easy"].tau
    assert any("easy: no priced failed runs" in n for n in result.notes)


def test_calibrate_keeping_tiers_and_leaving_unpriced_runs_out():
    pool = POOL + [run("a", cost=None)]
    result = calibrate(pool, {"a": "easy", "b": "easy", "c": "hard"}, derive_tiers=False, quantiles=(1.0,))
    assert result.tiers == {"a": "easy", "b": "easy", "c": "hard"}
    assert result.budgets["medium"] == TABLE1["medium"] and result.derived["medium"] == (False, False)
    assert any("without a price" in n for n in result.notes)


def test_calibrate_needs_three_tasks():
    with pytest.raises(ValueError, match="at least 3 tasks"):
        calibrate(POOL[:2], {"a": None})
