"""Bootstrap intervals over tasks: how sure a benchmark of 30 or 90 tasks is of its table.

A cell's three trials are too few for inference (seed 004), but the task set is a sample of the
tasks a configuration could meet, so the unit resampled is the task. Tasks are resampled within
their tier (each tier keeps its size, so AMS stays the mean of three tier scores) with
``scipy.stats.bootstrap``, seeded, percentile intervals: a report is reproducible byte for byte.

Every statistic is computed for every configuration from the same resamples, so the bootstrap
distribution also answers "how often is this configuration first, or in the top three" and
gives paired comparisons (the same resampled tasks for both sides).

Per configuration and task the formulas of ``ams.py`` reduce to sums, which is what makes
2,000 resamples of a 36 x 90 grid cost milliseconds: the task's pass (0/1), its attempts'
cost and passes (USD/Pass), and per tier its Eq. 7 terms ``alpha * R + (1 - alpha) * mean_b
R [C <= b]`` and the expensive-failure mark.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads with the first interval: a screen that shows none never pays for it
    import numpy as np

from ..vocab import TIERS
from .ams import DEFAULT_ALPHA, TierBudget
from .runs import Config, Run

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20260604  # the AgentMeter paper's price date: any fixed seed makes a report reproducible
LEVEL = 0.95
STATISTICS = ("passes", "usd_per_pass", "ams")


@dataclass(frozen=True)
class Interval:
    low: float | None
    high: float | None  # None: unbounded (some resamples have no pass, so USD/Pass has no value)

    def to_dict(self) -> dict[str, float | None]:
        return {"low": self.low, "high": self.high}


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b`` on the same resampled tasks: the AMS difference and how often a leads."""

    a: Config
    b: Config
    difference: Interval
    a_ahead: float  # share of resamples with AMS(a) > AMS(b)

    def to_dict(self) -> dict[str, Any]:
        return {"a": list(self.a), "b": list(self.b), "ams_difference": self.difference.to_dict(),
                "share_a_ahead": self.a_ahead}


@dataclass
class Intervals:
    """95 % intervals per configuration, rank shares, and the distribution for paired comparisons."""

    configs: list[Config]
    resamples: int
    seed: int
    level: float
    bounds: dict[str, dict[Config, Interval]]  # statistic -> configuration -> interval
    first: dict[Config, float]  # share of resamples in which the configuration has the highest AMS
    top3: dict[Config, float]
    distribution: np.ndarray = field(repr=False)  # (statistic, configuration, resample)

    def compare(self, a: Config, b: Config) -> Comparison:
        import numpy as np

        ams = self.distribution[STATISTICS.index("ams")]
        i, j = self.configs.index(a), self.configs.index(b)
        diff = ams[i] - ams[j]
        low, high = np.quantile(diff, [(1 - self.level) / 2, (1 + self.level) / 2])
        return Comparison(a, b, Interval(float(low), float(high)), float(np.mean(diff > 0)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": f"percentile bootstrap over tasks, stratified by tier, {self.resamples} resamples, "
                      f"seed {self.seed}", "level": self.level, "resamples": self.resamples, "seed": self.seed,
            "configurations": [
                {"model": c[0], "cli": c[1], **{s: self.bounds[s][c].to_dict() for s in STATISTICS},
                 "share_first": self.first[c], "share_top3": self.top3[c]} for c in self.configs],
        }


@dataclass(frozen=True)
class TaskTable:
    """Per configuration (rows) and task (columns), the terms the statistics sum."""

    strata: list[np.ndarray]  # task column indices per stratum: the tiers present, then untiered tasks
    tiered: int  # how many of the strata are tiers (they make AMS)
    passed: np.ndarray
    cost: np.ndarray  # NaN where an attempt was unpriced
    attempt_passes: np.ndarray
    eq7: np.ndarray  # alpha * R + (1 - alpha) * mean over the grid of R [success, C <= b]; 0 off-tier
    expensive: np.ndarray  # 1 for a valid, failed, priced run costing more than tau; 0 off-tier


def task_table(configs: Sequence[Config], attempts: Mapping[Config, Iterable[Run]],
               selected: Mapping[Config, Mapping[str, Run]], task_tiers: Mapping[str, str | None],
               budgets: Mapping[str, TierBudget], alpha: float = DEFAULT_ALPHA) -> TaskTable:
    import numpy as np

    tasks = list(task_tiers)
    column = {t: n for n, t in enumerate(tasks)}
    shape = (len(configs), len(tasks))
    passed, cost, attempt_passes, eq7, expensive = (np.zeros(shape) for _ in range(5))
    for row, config in enumerate(configs):
        for run in attempts.get(config, ()):
            if run.task in column:
                col = column[run.task]
                cost[row, col] += np.nan if run.cost is None else run.cost
                attempt_passes[row, col] += run.success
        for task, run in selected.get(config, {}).items():
            if task not in column:
                continue
            col, tier = column[task], task_tiers[task]
            passed[row, col] = run.success
            if tier in budgets:
                budget = budgets[tier]
                fits = [run.success and run.cost is not None and run.cost <= b for b in budget.grid]
                eq7[row, col] = alpha * run.reward + (1 - alpha) * run.reward * sum(fits) / len(fits)
                expensive[row, col] = (run.valid and not run.success and run.cost is not None
                                       and run.cost > budget.tau)
    strata = [np.array([column[t] for t in tasks if task_tiers[t] == tier]) for tier in TIERS]
    tiered = [s for s in strata if len(s)]
    rest = np.array([column[t] for t in tasks if task_tiers[t] not in TIERS])
    return TaskTable(tiered + ([rest] if len(rest) else []), len(tiered), passed, cost, attempt_passes, eq7,
                     expensive)


def statistics(table: TaskTable, *indices: np.ndarray) -> np.ndarray:
    """(statistic, configuration, resample) for resampled task columns, one index array per stratum
    (each of shape (resamples, stratum size)); the original table with ``np.arange`` indices."""
    import numpy as np

    def total(values: np.ndarray) -> np.ndarray:
        return sum(values[:, i].sum(axis=-1) for i in indices)

    passes = total(table.passed)
    with np.errstate(divide="ignore", invalid="ignore"):
        usd = total(table.cost) / total(table.attempt_passes)
    usd = np.where(np.isfinite(usd) | np.isnan(total(table.cost)), usd, np.inf)  # no pass: unbounded
    if table.tiered:
        scores = [table.eq7[:, i].mean(axis=-1) * (1 - table.expensive[:, i].mean(axis=-1))
                  for i in indices[:table.tiered]]
        ams = sum(scores) / table.tiered
    else:
        ams = np.full_like(passes, np.nan)
    return np.stack([passes, usd, ams])


def bootstrap(configs: Sequence[Config], table: TaskTable, resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED, level: float = LEVEL) -> Intervals:
    import numpy as np
    from scipy.stats import bootstrap as scipy_bootstrap

    configs = list(configs)
    # A stratum of one task has nothing to resample: it is held fixed (scipy needs two or more).
    varying = [n for n, s in enumerate(table.strata) if len(s) >= 2]

    def statistic(*indices: np.ndarray, axis: int = -1) -> np.ndarray:
        drawn = dict(zip(varying, indices, strict=True))
        batch = indices[0].shape[:-1] if indices else (resamples,)
        full = [np.asarray(drawn[n], dtype=np.intp) if n in drawn else np.broadcast_to(s, (*batch, len(s)))
                for n, s in enumerate(table.strata)]
        return statistics(table, *full)

    if varying:
        with warnings.catch_warnings():  # a degenerate statistic (all 0, or an unbounded USD/Pass) is fine here
            warnings.simplefilter("ignore")
            result = scipy_bootstrap(tuple(table.strata[n] for n in varying), statistic, n_resamples=resamples,
                                     vectorized=True, paired=False, confidence_level=level, method="percentile",
                                     rng=np.random.default_rng(seed))
        low, high = result.confidence_interval
        distribution = result.bootstrap_distribution
    else:  # no stratum to resample: every resample is the table itself
        distribution = statistic()
        low = high = distribution[..., 0]
    bounds = {name: {c: _interval(low[s, n], high[s, n]) for n, c in enumerate(configs)}
              for s, name in enumerate(STATISTICS)}
    first, top3 = rank_shares(distribution[STATISTICS.index("ams")])
    return Intervals(configs, resamples, seed, level, bounds,
                     dict(zip(configs, first, strict=True)), dict(zip(configs, top3, strict=True)), distribution)


def rank_shares(ams: np.ndarray) -> tuple[list[float], list[float]]:
    """Per configuration, the share of resamples in which it is first (ties: first for every tied
    one, as winrates count them) and in which at most two others are strictly ahead of it."""
    import numpy as np

    if not ams.size:
        return [], []
    ams = np.nan_to_num(ams, nan=-np.inf)
    best = ams.max(axis=0)
    ahead = (ams[None, :, :] > ams[:, None, :]).sum(axis=1)  # [i, r]: configurations strictly above i
    return [float(v) for v in (ams == best).mean(axis=1)], [float(v) for v in (ahead < 3).mean(axis=1)]


def _interval(low: float, high: float) -> Interval:
    import numpy as np

    def value(v: float) -> float | None:
        return None if not np.isfinite(v) else float(v)
    return Interval(value(low), value(high))
