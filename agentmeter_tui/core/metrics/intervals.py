"""Two-level bootstrap intervals: how sure a benchmark of 30 or 90 tasks, each run a few times, is
of its table.

The task set is a sample of the tasks a configuration could meet, and a cell's trials a sample of
the runs it could make on that task, so the bootstrap resamples both (a two-level, or nested,
bootstrap: Davison and Hinkley 1997, section 3.8): tasks with replacement within their tier (each
tier keeps its size, so AMS stays the mean of three tier scores), then within each drawn task that
cell's valid trials, with replacement, as many as it has. A resampled cell contributes the mean of
its drawn trials; the statistic is the every-trial estimate (Pass = the sum of the cells' pass
rates, USD/Pass = every attempt's cost over the passes, AMS from the cells' mean Eq. 7 terms),
which with one trial per cell is Table 2's own figure. Percentile intervals, seeded: a report is
reproducible byte for byte.

Below ``MIN_TASKS`` tasks there is no interval, only the words "too few tasks for an interval"
(docs/metrics.md says why): a percentile bootstrap over three tasks prints a narrow range that
looks like certainty.

Every configuration is scored on the same resampled tasks (its own trials drawn within them), so
the distribution also answers "how often is this configuration first, or in the top three" and
gives paired comparisons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads with the first interval: a screen that shows none never pays for it
    import numpy as np

from ..vocab import TIERS
from .ams import DEFAULT_ALPHA, TierBudget
from .attempts import Config, Attempt

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20260604  # the AgentMeter paper's price date: any fixed seed makes a report reproducible
LEVEL = 0.95
STATISTICS = ("passes", "usd_per_pass", "ams")
# Fewer tasks than this (in the strata a statistic resamples): no interval. The paper's tiers of Core30
# have 10 tasks each; below about 10 a percentile bootstrap of a mean covers clearly less than it
# claims and at 3 tasks it has at most 10 distinct resamples (docs/metrics.md).
MIN_TASKS = 10
TOO_FEW = "too few tasks for an interval"
METHOD = "two-level percentile bootstrap (tasks within their tier, then trials within each task)"


@dataclass(frozen=True)
class Interval:
    low: float | None
    high: float | None  # None: unbounded (some resamples have no pass, so USD/Pass has no value)
    too_few: bool = False  # below MIN_TASKS: no interval, and the report says so

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"low": self.low, "high": self.high}
        if self.too_few:
            out["too_few_tasks"] = True
        return out


NO_INTERVAL = Interval(None, None, True)


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b`` on the same resampled tasks: the AMS difference and how often each leads."""

    a: Config
    b: Config
    difference: Interval
    a_ahead: float | None  # share of resamples with AMS(a) > AMS(b); None with too few tasks
    b_ahead: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"a": list(self.a), "b": list(self.b), "ams_difference": self.difference.to_dict(),
                "share_a_ahead": self.a_ahead, "share_b_ahead": self.b_ahead}


@dataclass
class Intervals:
    """95 % intervals per configuration, rank shares, and the distribution for paired comparisons."""

    configs: list[Config]
    resamples: int
    seed: int
    level: float
    bounds: dict[str, dict[Config, Interval]]  # statistic -> configuration -> interval
    first: dict[Config, float | None]  # share of resamples in which the configuration has the highest AMS
    top3: dict[Config, float | None]
    distribution: np.ndarray = field(repr=False)  # (statistic, configuration, resample)
    estimates: dict[str, dict[Config, float | None]] = field(default_factory=dict)  # the every-trial figures
    n_tasks: dict[str, int] = field(default_factory=dict)  # statistic -> tasks its resamples draw from

    def compare(self, a: Config, b: Config) -> Comparison:
        import numpy as np

        if self.first.get(a) is None:  # too few tasks for an AMS interval
            return Comparison(a, b, NO_INTERVAL, None, None)
        ams = self.distribution[STATISTICS.index("ams")]
        i, j = self.configs.index(a), self.configs.index(b)
        diff = ams[i] - ams[j]
        low, high = np.quantile(diff, [(1 - self.level) / 2, (1 + self.level) / 2])
        return Comparison(a, b, Interval(float(low), float(high)), float(np.mean(diff > 0)), float(np.mean(diff < 0)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": f"{METHOD}, {self.resamples} resamples, seed {self.seed}", "level": self.level,
            "resamples": self.resamples, "seed": self.seed, "min_tasks": MIN_TASKS,
            "configurations": [
                {"model": c[0], "cli": c[1], **{s: self.bounds[s][c].to_dict() for s in STATISTICS},
                 "estimates": {s: self.estimates.get(s, {}).get(c) for s in STATISTICS},
                 "share_first": self.first[c], "share_top3": self.top3[c]} for c in self.configs],
        }


@dataclass(frozen=True)
class TaskTable:
    """Per configuration, task and trial (padded to the most trials of any cell), the terms the
    statistics sum; ``n`` says how many of each cell's trial slots are real."""

    strata: list[np.ndarray]  # task column indices per stratum: the tiers present, then untiered tasks
    tiered: int  # how many of the strata are tiers (they make AMS)
    n: np.ndarray  # (configuration, task): valid trials
    passed: np.ndarray  # (configuration, task, trial)
    cost: np.ndarray  # NaN where a trial was unpriced
    eq7: np.ndarray  # alpha * R + (1 - alpha) * mean over the grid of R [success, C <= b]; 0 off-tier
    expensive: np.ndarray  # 1 for a failed, priced trial costing more than tau; 0 off-tier
    fixed_cost: np.ndarray  # (configuration, task): the infra-invalid attempts' cost, in USD/Pass's sums


def task_table(configs: Sequence[Config], attempts: Mapping[Config, Iterable[Attempt]],
               task_tiers: Mapping[str, str | None], budgets: Mapping[str, TierBudget],
               alpha: float = DEFAULT_ALPHA) -> TaskTable:
    import numpy as np

    tasks = list(task_tiers)
    column = {t: n for n, t in enumerate(tasks)}
    cells: dict[tuple[int, int], list[Attempt]] = {}
    fixed_cost = np.zeros((len(configs), len(tasks)))
    for row, config in enumerate(configs):
        for run in attempts.get(config, ()):
            if run.task not in column:
                continue
            if run.valid:
                cells.setdefault((row, column[run.task]), []).append(run)
            else:
                fixed_cost[row, column[run.task]] += np.nan if run.cost is None else run.cost
    slots = max((len(v) for v in cells.values()), default=1)
    shape = (len(configs), len(tasks), slots)
    n = np.zeros(shape[:2], dtype=np.intp)
    passed, cost, eq7, expensive = (np.zeros(shape) for _ in range(4))
    for (row, col), runs in cells.items():
        n[row, col] = len(runs)
        tier = task_tiers[tasks[col]]
        for k, run in enumerate(runs):
            passed[row, col, k] = run.success
            cost[row, col, k] = np.nan if run.cost is None else run.cost
            if tier is not None and tier in budgets:
                budget = budgets[tier]
                fits = [run.success and run.cost is not None and run.cost <= b for b in budget.grid]
                eq7[row, col, k] = alpha * run.reward + (1 - alpha) * run.reward * sum(fits) / len(fits)
                expensive[row, col, k] = not run.success and run.cost is not None and run.cost > budget.tau
    strata = [np.array([column[t] for t in tasks if task_tiers[t] == tier], dtype=np.intp) for tier in TIERS]
    tiered = [s for s in strata if len(s)]
    rest = np.array([column[t] for t in tasks if task_tiers[t] not in TIERS], dtype=np.intp)
    return TaskTable(tiered + ([rest] if len(rest) else []), len(tiered), n, passed, cost, eq7, expensive,
                     fixed_cost)


def _cell_sums(table: TaskTable, row: int, columns: np.ndarray, draws: np.ndarray | None) -> dict[str, np.ndarray]:
    """Per resample and drawn task, the sums over the drawn trials (``draws`` of shape (..., tasks,
    slots) in [0, 1), scaled to each cell's count; None: every trial once, the point estimate)."""
    import numpy as np

    n = table.n[row][columns]
    slots = table.passed.shape[-1]
    mask = np.arange(slots) < n[..., None]
    if draws is None:
        trial = np.broadcast_to(np.arange(slots), mask.shape)
    else:
        trial = np.minimum((draws * n[..., None]).astype(np.intp), slots - 1)
    flat = columns[..., None] * slots + trial  # one gather per term from the flattened (task, trial) plane
    out = {}
    for name in ("passed", "cost", "eq7", "expensive"):
        values = np.take(getattr(table, name)[row].ravel(), flat)
        out[name] = np.where(mask, values, 0.0).sum(axis=-1)
    out["n"] = n
    return out


def _statistics(table: TaskTable, row: int, columns: list[np.ndarray], draws: np.ndarray | None) -> list:
    """Pass, USD/Pass and AMS for one configuration from the drawn task columns of each stratum
    (each (resamples, stratum size), or 1-D for the original table)."""
    import numpy as np

    every = np.concatenate(columns, axis=-1)
    sums = _cell_sums(table, row, every, draws)
    per = np.maximum(sums["n"], 1)
    rate = {k: sums[k] / per for k in ("passed", "eq7", "expensive")}
    passes = rate["passed"].sum(axis=-1)
    cost = (sums["cost"] + table.fixed_cost[row][every]).sum(axis=-1)
    attempt_passes = sums["passed"].sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        usd = cost / attempt_passes
    usd = np.where(np.isfinite(usd) | np.isnan(cost), usd, np.inf)  # no pass: unbounded
    if table.tiered:
        bounds = np.cumsum([0, *(c.shape[-1] for c in columns)])
        scores = [rate["eq7"][..., a:b].mean(axis=-1) * (1 - rate["expensive"][..., a:b].mean(axis=-1))
                  for a, b in zip(bounds[:table.tiered], bounds[1:table.tiered + 1], strict=True)]
        ams = sum(scores) / table.tiered
    else:
        ams = np.full_like(passes, np.nan)
    return [passes, usd, ams]


def bootstrap(configs: Sequence[Config], table: TaskTable, resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED, level: float = LEVEL) -> Intervals:
    """The draws, in this order from ``numpy.random.default_rng(seed)``: per stratum of two or more
    tasks (tiers easy, medium, hard, then untiered) ``integers(0, size, (resamples, size))``; then per
    configuration, in report order, ``random((resamples, tasks, slots))`` for the trials."""
    import numpy as np

    configs = list(configs)
    rng = np.random.default_rng(seed)
    columns = [rng.integers(0, len(s), (resamples, len(s))) if len(s) >= 2 else np.zeros((resamples, len(s)), np.intp)
               for s in table.strata]
    columns = [s[c] for s, c in zip(table.strata, columns, strict=True)]  # a stratum of one task is held fixed
    total = sum(len(s) for s in table.strata)
    slots = table.passed.shape[-1]
    rows, points = [], []
    for row in range(len(configs)):
        draws = rng.random((resamples, total, slots))
        rows.append(_statistics(table, row, columns, draws))
        points.append(_statistics(table, row, list(table.strata), None))
    distribution = np.array([[rows[c][s] for c in range(len(configs))] for s in range(len(STATISTICS))]).reshape(
        len(STATISTICS), len(configs), resamples)
    sizes = _resampled_sizes(table)
    with np.errstate(invalid="ignore"):  # between two unbounded USD/Pass resamples: inf - inf, no value
        quantiles = np.quantile(distribution, [(1 - level) / 2, (1 + level) / 2], axis=-1)
    bounds = {name: {c: (_interval(quantiles[0, s, n], quantiles[1, s, n]) if sizes[name] >= MIN_TASKS
                         else NO_INTERVAL) for n, c in enumerate(configs)}
              for s, name in enumerate(STATISTICS)}
    estimates = {name: {c: _value(points[n][s]) for n, c in enumerate(configs)} for s, name in enumerate(STATISTICS)}
    first: Sequence[float | None]
    top3: Sequence[float | None]
    if sizes["ams"] >= MIN_TASKS:
        first, top3 = rank_shares(distribution[STATISTICS.index("ams")])
    else:
        first = top3 = [None] * len(configs)
    return Intervals(configs, resamples, seed, level, bounds, dict(zip(configs, first, strict=True)),
                     dict(zip(configs, top3, strict=True)), distribution, estimates, sizes)


def _resampled_sizes(table: TaskTable) -> dict[str, int]:
    """Tasks each statistic's resamples draw from. AMS has none when a tier of one task is held fixed:
    its tier score would look certain."""
    varying = [len(s) for s in table.strata if len(s) >= 2]
    tiers = [len(s) for s in table.strata[:table.tiered]]
    ams = 0 if any(n < 2 for n in tiers) else sum(tiers)
    return {"passes": sum(varying), "usd_per_pass": sum(varying), "ams": ams}


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


def _value(v: Any) -> float | None:
    import numpy as np

    v = float(np.asarray(v))
    return None if not np.isfinite(v) else v


def _interval(low: float, high: float) -> Interval:
    return Interval(_value(low), _value(high))
