"""Rubric medians, winrates with ties and the honesty gate (seed 004)."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.metrics.rubric import (
    Standing,
    cell_medians,
    honesty_gate,
    own_configurations,
    standings,
    task_winners,
)

A, B, C = ("m", "ours"), ("m", "rival"), ("n", "ours")


def test_cell_median_of_three_trials_and_of_two():
    medians = cell_medians([(A, "t1", 3), (A, "t1", 0), (A, "t1", 2), (B, "t1", 1), (B, "t1", 2)])
    assert medians[(A, "t1")] == 2.0
    assert medians[(B, "t1")] == 1.5  # an even count takes the mean of the two middle scores


def test_ties_are_wins_for_all_tied_and_winrates_can_sum_above_one():
    medians = {(A, "t1"): 3, (B, "t1"): 3, (A, "t2"): 1, (B, "t2"): 2, (A, "t3"): 2, (B, "t3"): 0}
    assert task_winners(medians) == {"t1": [A, B], "t2": [B], "t3": [A]}
    table = standings(medians)
    assert table[A] == Standing(wins=2, losses=1, tasks=3)
    assert table[B] == Standing(wins=2, losses=1, tasks=3)
    assert table[A].winrate + table[B].winrate == pytest.approx(4 / 3)


def test_unscored_cell_is_neither_win_nor_loss_but_stays_in_the_denominator():
    medians = {(A, "t1"): 3, (B, "t1"): 1, (B, "t2"): 2}
    table = standings(medians)
    assert table[A] == Standing(1, 0, 2) and table[A].unscored == 1 and table[A].winrate == 0.5
    assert table[B] == Standing(1, 1, 2)


def test_own_configurations_by_pair_or_cli():
    configs = [A, B, C]
    assert own_configurations("m|ours", configs) == [A]
    assert own_configurations("ours", configs) == [A, C]
    assert own_configurations("nobody", configs) == []


def _grid(own_wins: int, own_losses: int, own_unscored: int = 0) -> dict:
    """Medians over ``own_wins + own_losses + own_unscored`` tasks for A (ours) against B."""
    medians, n = {}, 0
    for _ in range(own_wins):
        medians[(A, f"t{n}")], medians[(B, f"t{n}")] = 3, 2
        n += 1
    for _ in range(own_losses):
        medians[(A, f"t{n}")], medians[(B, f"t{n}")] = 1, 3
        n += 1
    for _ in range(own_unscored):
        medians[(B, f"t{n}")] = 2
        n += 1
    return medians


def test_gate_fails_when_own_wins_everything():
    result = honesty_gate("m|ours", standings(_grid(10, 0)))
    assert not result.passed
    assert "loses 0 of 10" in result.message and "winrate 1.00" in result.message


def test_gate_passes_with_two_losses_and_winrate_0_7():
    table = standings(_grid(7, 2, own_unscored=1))
    assert table[A].losses == 2 and table[A].winrate == pytest.approx(0.7)
    result = honesty_gate("m|ours", table)
    assert result.passed, result.message


def test_gate_fails_on_one_loss_or_winrate_at_0_8():
    assert not honesty_gate("m|ours", standings(_grid(9, 1))).passed  # one loss only
    table = standings(_grid(8, 2))
    assert table[A].winrate == pytest.approx(0.8)
    result = honesty_gate("m|ours", table)
    assert not result.passed and "below 0.80" in result.message


def test_gate_by_cli_checks_every_configuration_of_that_cli():
    medians = _grid(7, 3)
    medians.update({(C, k[1]): 3 for k in list(medians)})  # the other model with our CLI wins all
    result = honesty_gate("ours", standings(medians), [A, B, C])
    assert not result.passed and "n/ours" in result.message


def test_gate_with_no_matching_configuration_fails_clearly():
    result = honesty_gate("ghost", standings(_grid(1, 2)), [A, B])
    assert not result.passed and "no configuration matches" in result.message


def test_gate_without_any_scores_fails():
    result = honesty_gate("m|ours", {}, [A, B])
    assert not result.passed and "loses 0" in result.message
