"""Every-trial statistics against independent computations: pass@k against the numerically stable
form in Chen et al. 2021's own code (Fig. 3 of the HumanEval paper) and against enumerating every
k-subset of the trials; pass^k by enumeration; Wilson's interval against
``scipy.stats.binomtest(...).proportion_ci(method="wilson")``; standard errors against
``scipy.stats.sem``; spreads against numpy. Nothing of ``metrics.trials`` makes the expected values."""

from __future__ import annotations

import csv
import io
import itertools

import numpy as np
import orjson
import pytest
from scipy import stats

from agentmeter_tui.core.metrics.attempts import Attempt
from agentmeter_tui.core.metrics.trials import pass_at_k, pass_hat_k, wilson
from agentmeter_tui.core.reporting import build_report
from agentmeter_tui.core.reporting.render import render_csv, render_json, render_markdown

CONFIGS = [("m1", "a"), ("m2", "b")]
TASKS = {"e1": "easy", "e2": "easy", "m1": "medium", "h1": "hard"}


def humaneval_pass_at_k(n: int, c: int, k: int) -> float:
    """Verbatim from Chen et al. 2021, Figure 3."""
    if n - c < k:
        return 1.0
    return 1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))


def by_subsets(outcomes: list[bool], k: int, every: bool) -> float:
    subsets = list(itertools.combinations(outcomes, k))
    return sum((all if every else any)(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_and_pass_hat_k_match_the_paper_and_enumeration(n):
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(humaneval_pass_at_k(n, c, k), abs=1e-12)
            assert pass_at_k(n, c, k) == pytest.approx(by_subsets(outcomes, k, every=False), abs=1e-12)
            assert pass_hat_k(n, c, k) == pytest.approx(by_subsets(outcomes, k, every=True), abs=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(n, 0, n + 1)


@pytest.mark.parametrize(("c", "n"), [(0, 1), (1, 1), (0, 5), (3, 5), (5, 5), (7, 20), (1, 3)])
def test_wilson_matches_scipy(c, n):
    expected = stats.binomtest(c, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = wilson(c, n)
    assert low == pytest.approx(expected.low, abs=1e-9) and high == pytest.approx(expected.high, abs=1e-9)
    assert wilson(0, 0) is None


def _runs() -> list[Attempt]:
    rng = np.random.default_rng(7)
    runs = []
    for k, (model, cli) in enumerate(CONFIGS):
        for task in TASKS:
            for trial in range(5 - (task == "h1")):  # h1 has 4 trials: pass@k goes up to k = 4
                ok = bool(rng.random() < 0.3 + 0.3 * k)
                runs.append(Attempt(task, model, cli, trial=trial, status="passed" if ok else "failed", passed=ok,
                                quality=1.0 if ok else float(np.round(rng.random() * 0.4, 2)),
                                raw_tokens=int(rng.integers(1000, 9000)), cost=float(np.round(rng.random(), 3)),
                                finished_at=f"2026-11-01T00:0{trial}"))
    # an infra-invalid attempt: not a trial of the configuration
    runs.append(Attempt("e1", "m1", "a", trial=9, status="infra-invalid", raw_tokens=5, cost=9.0))
    return runs


def test_report_counts_every_trial():
    runs = _runs()
    report = build_report(runs, suite="s", task_tiers=TASKS)
    data = orjson.loads(render_json(report))["trials"]
    assert data["selection"] == "every-trial"
    for c in CONFIGS:
        cell_runs = {t: [r for r in runs if r.config == c and r.task == t and r.status != "infra-invalid"]
                     for t in TASKS}
        row = next(x for x in data["configurations"] if (x["model"], x["cli"]) == c)
        rewards = {t: np.array([r.quality if r.status in ("passed", "failed") else 0.0 for r in rs])
                   for t, rs in cell_runs.items()}
        assert row["trials"] == sum(len(rs) for rs in cell_runs.values())
        assert row["passes"] == sum(r.passed for rs in cell_runs.values() for r in rs)
        assert row["mean_reward"] == pytest.approx(np.mean([v.mean() for v in rewards.values()]))
        assert row["stderr"] == pytest.approx(np.sqrt(sum(stats.sem(v) ** 2 for v in rewards.values())) / len(TASKS))
        assert sorted(row["pass_at_k"]) == ["1", "2", "3", "4"]
        for k in range(1, 5):
            per_task = [by_subsets([r.passed for r in rs], k, every=False) for rs in cell_runs.values()]
            every = [by_subsets([r.passed for r in rs], k, every=True) for rs in cell_runs.values()]
            assert row["pass_at_k"][str(k)] == pytest.approx(np.mean(per_task))
            assert row["pass_hat_k"][str(k)] == pytest.approx(np.mean(every))
        costs = np.array([r.cost for rs in cell_runs.values() for r in rs])
        assert row["cost_per_trial"] == pytest.approx({"mean": costs.mean(), "min": costs.min(), "max": costs.max()})
        tokens = np.array([r.raw_tokens for rs in cell_runs.values() for r in rs])
        assert row["tokens_per_trial"]["mean"] == pytest.approx(tokens.mean())
        for t, rs in cell_runs.items():
            cell = next(x for x in data["tasks"] if x["task"] == t and (x["model"], x["cli"]) == c)
            passes = sum(r.passed for r in rs)
            ci = stats.binomtest(passes, len(rs)).proportion_ci(method="wilson")
            assert cell["pass_rate_wilson"] == pytest.approx({"low": ci.low, "high": ci.high})
            assert cell["stderr"] == pytest.approx(stats.sem(rewards[t]))
            assert cell["pass_at_k"][str(len(rs))] == (1.0 if passes else 0.0)


def test_every_trial_tables_in_markdown_and_csv_say_their_selection():
    report = build_report(_runs(), suite="s", task_tiers=TASKS, selection="median")
    text = render_markdown(report)
    assert "## Every trial" in text and "### Every trial, per task" in text
    assert "Selection: `median`" in text and "Selection: every valid trial" in text
    rows = list(csv.reader(io.StringIO(render_csv(report))))
    assert rows[1][-2] == "median"
    header = next(r for r in rows if r[:3] == ["Model", "CLI", "Trials"])
    assert "pass@4" in header and "pass^4" in header and header[-1] == "Selection"
    cells = next(r for r in rows if r[:3] == ["Task", "Model", "CLI"])
    assert "Wilson_low" in cells


def test_delta_best_is_bold_only_where_it_means_something():
    runs = [Attempt(t, "m", cli, passed=ok, status="passed" if ok else "failed", quality=float(ok), cost=0.01)
            for t in TASKS for cli, ok in (("x", True), ("y", t != "h1"), ("z", t == "e1"))]
    text = render_markdown(build_report(runs, suite="s", task_tiers=TASKS))
    table2 = text.split("Bold marks")[0]
    rows = {line.split("|")[2].strip(): line.split("|")[-2].strip() for line in table2.splitlines()
            if line.startswith("| ") and line.split("|")[2].strip() in ("x", "y", "z")}
    assert rows["x"] == "best"
    assert rows["y"].startswith("**") and not rows["z"].startswith("**")
