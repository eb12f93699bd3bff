"""Rank validation between a full task set and a subset (seed 000 Table 4)."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.metrics.validation import rank_validation

FULL = {("a", "x"): 0.50, ("b", "x"): 0.40, ("c", "x"): 0.30, ("d", "x"): 0.20}


def test_identical_rankings():
    v = rank_validation(FULL, dict(FULL))
    assert v.n == 4 and v.spearman == pytest.approx(1.0) and v.kendall == pytest.approx(1.0)
    assert v.mae == 0.0 and v.top1_preserved and v.top3_preserved


def test_hand_computed_swap():
    # The subset swaps the 3rd and 4th: one discordant pair of six.
    subset = {("a", "x"): 0.55, ("b", "x"): 0.45, ("c", "x"): 0.10, ("d", "x"): 0.25}
    v = rank_validation(FULL, subset)
    assert v.spearman == pytest.approx(1 - 6 * (1 + 1) / (4 * (16 - 1)))  # 0.8
    assert v.kendall == pytest.approx((5 - 1) / 6)
    assert v.mae == pytest.approx((0.05 + 0.05 + 0.20 + 0.05) / 4)
    assert v.top1_preserved and not v.top3_preserved
    rows = {r.config: r for r in v.rows}
    assert rows[("c", "x")].full_rank == 3 and rows[("c", "x")].subset_rank == 4
    assert rows[("c", "x")].delta == pytest.approx(0.20)
    assert [r.full_rank for r in v.rows] == [1, 2, 3, 4]


def test_kendall_is_tau_b_with_ties():
    subset = {("a", "x"): 0.5, ("b", "x"): 0.5, ("c", "x"): 0.3, ("d", "x"): 0.2}
    v = rank_validation(FULL, subset)
    # tau-b = (C - D) / sqrt((n0 - n1)(n0 - n2)) = 5 / sqrt(6 * 5)
    assert v.kendall == pytest.approx(5 / (30 ** 0.5))


def test_only_configurations_scored_in_both_count():
    v = rank_validation({**FULL, ("e", "x"): 0.9}, {**FULL, ("f", "x"): 0.1, ("d", "x"): None})
    assert v.n == 3 and {r.config for r in v.rows} == {("a", "x"), ("b", "x"), ("c", "x")}


def test_degenerate_inputs_give_none_not_nan():
    v = rank_validation({("a", "x"): 0.5}, {("a", "x"): 0.4})
    assert v.spearman is None and v.kendall is None and v.mae == pytest.approx(0.1)
    flat = rank_validation(FULL, dict.fromkeys(FULL, 0.3))
    assert flat.spearman is None and flat.kendall is None
    empty = rank_validation({}, {})
    assert empty.n == 0 and empty.mae is None and not empty.top1_preserved
