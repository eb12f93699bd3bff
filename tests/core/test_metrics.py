"""AgentMeter formulas on hand-computed cases (seed 000 Eqs. 3-8), edge cases included."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.metrics import (
    TABLE1,
    Attempt,
    TierBudget,
    agentmeter_score,
    cbq,
    cost_aubqc,
    delta_best,
    efr,
    per_pass,
    score_configuration,
    select_attempt,
    select_attempts,
    success_rate,
    tier_score,
    tier_stats,
)


def run(task="t1", status="passed", quality=None, cost=0.1, tokens=1000, trial=0, attempt=0, finished=None,
        model="m", cli="c", id=None):
    passed = status == "passed"
    if quality is None:
        quality = 1.0 if passed else 0.0
    return Attempt(task, model, cli, trial, status, passed, quality, tokens, cost, attempt, 3, 2, finished, id)


# One tier of four tasks, grid (0.1, 0.5), tau 0.3:
#   t1 passed, $0.05: counts at both budget points
#   t2 passed, $0.40: counts at 0.5 only
#   t3 failed with partial quality 0.5, $0.60: in SR, never in CBQ, an expensive failure
#   t4 missing: zero everywhere
HAND = [run("t1", cost=0.05), run("t2", cost=0.40), run("t3", "failed", quality=0.5, cost=0.60)]


def test_success_rate_counts_partial_quality_and_missing_tasks_as_zero():
    assert success_rate(HAND, 4) == pytest.approx((1 + 1 + 0.5) / 4)


def test_cbq_at_each_budget_point():
    assert cbq(HAND, 4, 0.1) == pytest.approx(0.25)
    assert cbq(HAND, 4, 0.5) == pytest.approx(0.5)
    assert cbq(HAND, 4, 0.01) == 0.0


def test_cbq_budget_is_inclusive():
    assert cbq([run(cost=0.1)], 1, 0.1) == 1.0


def test_cost_aubqc_is_mean_over_grid():
    assert cost_aubqc(HAND, 4, (0.1, 0.5)) == pytest.approx(0.375)


def test_efr_counts_failed_runs_strictly_above_tau():
    assert efr(HAND, 4, 0.3) == pytest.approx(0.25)
    assert efr([run(status="failed", cost=0.3)], 1, 0.3) == 0.0  # equal to tau is not expensive
    assert efr([run(status="passed", cost=9.0)], 1, 0.3) == 0.0  # a costly pass is no failure


def test_tier_score_and_stats():
    assert tier_score(0.625, 0.375, 0.25, 0.6) == pytest.approx((0.6 * 0.625 + 0.4 * 0.375) * 0.75)
    stats = tier_stats(HAND, 4, TierBudget((0.5, 0.1), 0.3))
    assert stats.cbq == (pytest.approx(0.25), pytest.approx(0.5))  # grid sorted ascending
    assert stats.passes == 2
    assert stats.score == pytest.approx(0.39375)


def test_alpha_is_configurable():
    stats = tier_stats(HAND, 4, TierBudget((0.1, 0.5), 0.3), alpha=1.0)
    assert stats.score == pytest.approx(0.625 * 0.75)


def test_non_completion_contributes_zero_quality():
    killed = run(status="killed", quality=0.7, cost=5.0)
    errored = run("t2", status="errored", quality=0.4, cost=0.01)
    assert success_rate([killed, errored], 2) == 0.0
    assert efr([killed, errored], 2, 1.0) == 0.5  # the killed run is a costly failure


def test_unpriced_runs_fit_no_budget_and_are_not_called_expensive():
    unpriced_pass = run("t1", cost=None)
    unpriced_fail = run("t2", status="failed", cost=None)
    assert success_rate([unpriced_pass, unpriced_fail], 2) == 0.5
    assert cbq([unpriced_pass, unpriced_fail], 2, 100.0) == 0.0
    assert efr([unpriced_pass, unpriced_fail], 2, 0.0) == 0.0


def test_formulas_refuse_more_runs_than_tasks_and_empty_tiers():
    with pytest.raises(ValueError):
        success_rate(HAND, 2)
    with pytest.raises(ValueError):
        cbq([], 0, 0.1)
    with pytest.raises(ValueError):
        TierBudget((), 0.1)


def test_ams_is_mean_of_present_tiers():
    assert agentmeter_score({"easy": 0.9, "medium": 0.3, "hard": 0.0}) == pytest.approx(0.4)
    assert agentmeter_score({"easy": 0.9, "medium": 0.3, "hard": None}) == pytest.approx(0.6)
    assert agentmeter_score({"easy": None, "medium": None, "hard": None}) is None


def test_per_pass_without_a_pass_is_none():
    assert per_pass(1000, 0) is None
    assert per_pass(None, 3) is None
    assert per_pass(900, 3) == 300


def test_delta_best_is_same_model_gap():
    gaps = delta_best({("a", "x"): 0.5, ("a", "y"): 0.3, ("b", "x"): 0.1, ("b", "y"): None})
    assert gaps[("a", "x")] == 0.0
    assert gaps[("a", "y")] == pytest.approx(0.2)
    assert gaps[("b", "x")] == 0.0
    assert gaps[("b", "y")] is None


def test_table1_defaults():
    assert TABLE1["easy"].grid == (0.01, 0.04, 0.10, 0.18, 0.26) and TABLE1["easy"].tau == 0.12
    assert TABLE1["medium"].grid == (0.03, 0.07, 0.24, 0.58, 0.82) and TABLE1["medium"].tau == 0.40
    assert TABLE1["hard"].grid == (0.06, 0.21, 0.87, 2.34, 3.47) and TABLE1["hard"].tau == 2.18


# -- selection ---------------------------------------------------------------------------------

def test_latest_selection_skips_infra_invalid_and_takes_the_latest_finished():
    attempts = [run(status="failed", trial=0, finished="2026-06-01T10:00:00"),
                run(status="passed", trial=1, finished="2026-06-02T10:00:00"),
                run(status="infra-invalid", trial=2, finished="2026-06-03T10:00:00")]
    assert select_attempt(attempts, "latest").trial == 1


def test_latest_selection_breaks_time_ties_by_trial_and_attempt():
    attempts = [run(trial=2, attempt=0), run(trial=2, attempt=1, status="failed"), run(trial=1)]
    chosen = select_attempt(attempts, "latest")
    assert (chosen.trial, chosen.attempt) == (2, 1)


def test_median_selection_picks_the_middle_run():
    a, b, c = run(quality=1.0, cost=0.3, trial=0), run("t1", "failed", 0.2, trial=1), run(quality=1.0, cost=0.1,
                                                                                             trial=2)
    assert select_attempt([a, b, c], "median") is a  # order: b (fail) < a (pass, dearer) < c (pass, cheaper)
    assert select_attempt([a, c], "median") is a  # even count: the lower middle
    unpriced = run(cost=None, trial=3)
    assert select_attempt([unpriced, c], "median") is unpriced  # an unpriced pass ranks below a priced one


def test_selection_of_only_infra_invalid_attempts_is_missing():
    assert select_attempt([run(status="infra-invalid"), run(status="infra-invalid", attempt=1)]) is None
    with pytest.raises(ValueError):
        select_attempt([run()], "best")


def test_select_runs_one_per_cell():
    runs = [run("t1", trial=0), run("t1", trial=1), run("t2", cli="d"), run("t3", status="infra-invalid")]
    chosen = select_attempts(runs)
    assert set(chosen) == {(("m", "c"), "t1"), (("m", "d"), "t2")}


# -- a whole configuration -----------------------------------------------------------------

TIERS6 = {"e1": "easy", "e2": "easy", "m1": "medium", "m2": "medium", "h1": "hard", "h2": "hard"}
BUDGETS = {"easy": TierBudget((0.1, 0.2), 0.15), "medium": TierBudget((0.5,), 0.5), "hard": TierBudget((1.0,), 2.0)}


def _score(attempts, tiers=TIERS6, budgets=BUDGETS, alpha=0.6):
    selected = {task: r for (_c, task), r in select_attempts(attempts).items()}
    return score_configuration(("m", "c"), attempts, selected, tiers, budgets, alpha)


def test_configuration_by_hand():
    attempts = [
        run("e1", cost=0.05, tokens=100),  # easy pass, within both budgets
        run("e2", cost=0.15, tokens=300),  # easy pass, within 0.2 only
        run("m1", "infra-invalid", cost=0.02, tokens=50),  # retried ...
        run("m1", cost=0.4, tokens=400, attempt=1),  # ... and passed
        run("m2", "failed", cost=0.9, tokens=900),  # expensive medium failure
        run("h1", "killed", cost=3.0, tokens=3000),  # expensive hard failure (killed)
        # h2 never ran
    ]
    row = _score(attempts)
    assert row.passes == 3 and row.n_tasks == 6
    assert row.passes_by_tier == {"easy": 2, "medium": 1, "hard": 0}
    assert row.tokens_per_pass == pytest.approx((100 + 300 + 50 + 400 + 900 + 3000) / 3)
    assert row.usd_per_pass == pytest.approx((0.05 + 0.15 + 0.02 + 0.4 + 0.9 + 3.0) / 3)
    easy, medium, hard = (row.tiers[t] for t in ("easy", "medium", "hard"))
    assert easy.sr == 1.0 and easy.cbq == (0.5, 1.0) and easy.efr == 0.0
    assert easy.score == pytest.approx(0.6 * 1.0 + 0.4 * 0.75)
    assert medium.sr == 0.5 and medium.cbq == (0.5,) and medium.efr == 0.5
    assert medium.score == pytest.approx((0.6 * 0.5 + 0.4 * 0.5) * 0.5)
    assert hard.sr == 0.0 and hard.efr == 0.5 and hard.score == 0.0
    assert row.ams == pytest.approx((0.9 + 0.25 + 0.0) / 3)
    assert row.invalid_attempts == 1 and row.missing_tasks == 1


def test_configuration_without_a_pass_has_null_per_pass_figures():
    row = _score([run("e1", "failed", cost=0.01), run("m1", "errored", cost=0.02)])
    assert row.passes == 0 and row.tokens_per_pass is None and row.usd_per_pass is None
    assert row.ams == 0.0


def test_all_attempts_infra_invalid():
    attempts = [run(t, "infra-invalid", cost=0.01, tokens=10) for t in TIERS6]
    row = _score(attempts)
    assert row.passes == 0 and row.missing_tasks == 6 and row.invalid_attempts == 6
    assert row.tokens_per_pass is None and row.usd_per_pass is None
    assert row.tier_scores == {"easy": 0.0, "medium": 0.0, "hard": 0.0} and row.ams == 0.0


def test_tier_without_tasks_is_left_out_of_ams():
    tiers = {"e1": "easy", "m1": "medium", "u1": None}
    row = _score([run("e1", cost=0.05), run("m1", "failed", cost=0.1), run("u1", cost=0.01)], tiers=tiers)
    assert row.tiers["hard"] is None and row.tier_scores["hard"] is None
    assert row.ams == pytest.approx((row.tier_scores["easy"] + row.tier_scores["medium"]) / 2)
    assert row.passes == 2 and row.n_tasks == 3  # the untiered pass counts in Pass/N, not in any tier
    assert row.passes_by_tier == {"easy": 1, "medium": 0, "hard": 0}


def test_unpriced_attempt_makes_usd_per_pass_unknown_not_cheaper():
    row = _score([run("e1", cost=0.05), run("e2", cost=None)])
    assert row.unpriced_attempts == 1
    assert row.usd_per_pass is None
    assert row.tokens_per_pass == pytest.approx(1000)


def test_attempts_outside_the_task_set_are_ignored():
    row = _score([run("e1", cost=0.05), run("zz", cost=9.0, tokens=10**6)])
    assert row.tokens_per_pass == 1000 and row.usd_per_pass == pytest.approx(0.05)
