"""Calibration from a pool of trials: task-effort tiers (seed 000 Eq. 1), budget grids, tau.

Tiers come first and use no cost: E_i = 0.55 (1 - s_i) + 0.25 q(l(T~_i)) + 0.10 q(l(U~_i))
+ 0.10 q(l(I~_i)), with s_i = 0.7 p_i + 0.3 r_i, l(x) = log(1 + x) and q the percentile rank
over tasks; tasks sorted by E split into equal thirds (Easy lowest). The interaction
footprint I~ is the median tool-call count of a task's runs: the store's record of how
much a run interacted with its environment. Then, per (new) tier, the budget grid is the
rounded cost quantiles of its priced valid runs and tau the rounded P90 cost of its
failed ones. Only valid (not infra-invalid) runs enter the pool.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..vocab import TIERS
from .ams import TABLE1, TierBudget
from .attempts import Attempt

DEFAULT_QUANTILES: tuple[float, ...] = (0.10, 0.25, 0.50, 0.75, 0.90)
TAU_QUANTILE = 0.90
WEIGHTS = {"unsolvability": 0.55, "tokens": 0.25, "turns": 0.10, "footprint": 0.10}


@dataclass(frozen=True)
class TaskEffort:
    task: str
    runs: int
    pass_rate: float  # p_i
    mean_reward: float  # r_i
    median_tokens: float  # T~_i
    median_turns: float  # U~_i
    median_footprint: float  # I~_i (tool calls)
    effort: float = 0.0  # E_i

    @property
    def solvability(self) -> float:
        """s_i: completion-adjusted, so partial credit alone never looks solved."""
        return 0.7 * self.pass_rate + 0.3 * self.mean_reward


def percentile_ranks(values: Sequence[float]) -> list[float]:
    """q(.): average rank / n, in (0, 1]; equal values share a rank."""
    from scipy.stats import rankdata

    if not values:
        return []
    return [float(r) / len(values) for r in rankdata(values, method="average")]


def _log1p(values: Iterable[float]) -> list[float]:
    return [math.log1p(v) for v in values]


def task_efforts(runs: Iterable[Attempt]) -> list[TaskEffort]:
    """Eq. 1 for every task with at least one valid run, sorted by task id."""
    per_task: dict[str, list[Attempt]] = defaultdict(list)
    for run in runs:
        if run.valid:
            per_task[run.task].append(run)
    base = [
        TaskEffort(task, len(rs), sum(r.success for r in rs) / len(rs), sum(r.reward for r in rs) / len(rs),
                   statistics.median(r.raw_tokens for r in rs), statistics.median(r.turns for r in rs),
                   statistics.median(r.tool_calls for r in rs))
        for task, rs in sorted(per_task.items())
    ]
    q_tokens = percentile_ranks(_log1p(t.median_tokens for t in base))
    q_turns = percentile_ranks(_log1p(t.median_turns for t in base))
    q_footprint = percentile_ranks(_log1p(t.median_footprint for t in base))
    w = WEIGHTS
    return [
        TaskEffort(t.task, t.runs, t.pass_rate, t.mean_reward, t.median_tokens, t.median_turns, t.median_footprint,
                   w["unsolvability"] * (1 - t.solvability) + w["tokens"] * qt + w["turns"] * qu
                   + w["footprint"] * qi)
        for t, qt, qu, qi in zip(base, q_tokens, q_turns, q_footprint)
    ]


def split_thirds(efforts: Mapping[str, float]) -> dict[str, str]:
    """Tasks by ascending effort (ties by id) cut into equal thirds: easy, medium, hard.

    With a count not divisible by three the cuts fall at round(n/3) and round(2n/3).
    """
    ordered = sorted(efforts, key=lambda task: (efforts[task], task))
    n = len(ordered)
    first, second = round(n / 3), round(2 * n / 3)
    return {task: ("easy" if i < first else "medium" if i < second else "hard") for i, task in enumerate(ordered)}


def round_budget(value: float) -> float:
    """Round a USD figure like Table 1: to the cent, or to two significant figures below a cent."""
    if value <= 0:
        return 0.0
    if value >= 0.01:
        return round(value, 2)
    return float(f"{value:.2g}")


def quantile(values: Sequence[float], q: float) -> float:
    from numpy import quantile as np_quantile

    return float(np_quantile(values, q))


def cost_grid(costs: Sequence[float], quantiles: Sequence[float] = DEFAULT_QUANTILES) -> tuple[float, ...]:
    """Rounded cost quantiles, duplicates merged; empty when there are no costs."""
    if not costs:
        return ()
    return tuple(sorted({round_budget(quantile(costs, q)) for q in quantiles}))


def failure_threshold(failed_costs: Sequence[float], q: float = TAU_QUANTILE) -> float | None:
    """tau_g: the rounded P90 cost of failed runs; None without failed runs."""
    return round_budget(quantile(failed_costs, q)) if failed_costs else None


@dataclass
class Calibration:
    efforts: list[TaskEffort]
    tiers: dict[str, str | None]  # every task -> its tier after calibration
    budgets: dict[str, TierBudget]
    derived: dict[str, tuple[bool, bool]]  # tier -> (grid derived, tau derived); False: the default kept
    notes: list[str] = field(default_factory=list)


def calibrate(runs: Sequence[Attempt], task_tiers: Mapping[str, str | None], *, derive_tiers: bool = True,
              quantiles: Sequence[float] = DEFAULT_QUANTILES,
              defaults: Mapping[str, TierBudget] = TABLE1) -> Calibration:
    """Derive tiers (unless ``derive_tiers`` is False), then grids and tau per tier.

    ``task_tiers``: the suite's tasks and their current tiers. A tier without priced runs keeps
    its default grid, one without failed priced runs its default tau; the notes say which.
    """
    notes: list[str] = []
    pool = [r for r in runs if r.task in task_tiers]
    efforts = task_efforts(pool)
    tiers = dict(task_tiers)
    if derive_tiers:
        if len(efforts) < 3:
            raise ValueError(f"tier calibration needs valid runs on at least 3 tasks; found {len(efforts)}")
        tiers.update(split_thirds({e.task: e.effort for e in efforts}))
        unseen = sorted(set(task_tiers) - {e.task for e in efforts})
        if unseen:
            notes.append(f"{len(unseen)} task(s) without a valid run keep their tier: {', '.join(unseen[:10])}"
                         + (" ..." if len(unseen) > 10 else ""))
    costs: dict[str, list[float]] = defaultdict(list)
    failed: dict[str, list[float]] = defaultdict(list)
    unpriced = 0
    for run in pool:
        tier = tiers.get(run.task)
        if not run.valid or tier is None:
            continue
        if run.cost is None:
            unpriced += 1
            continue
        costs[tier].append(run.cost)
        if not run.success:
            failed[tier].append(run.cost)
    if unpriced:
        notes.append(f"{unpriced} valid run(s) without a price are left out of the cost quantiles")
    budgets, derived = {}, {}
    for tier in TIERS:
        grid = cost_grid(costs[tier], quantiles)
        tau = failure_threshold(failed[tier])
        if not grid:
            notes.append(f"{tier}: no priced runs; keeping the default grid")
        if tau is None:
            notes.append(f"{tier}: no priced failed runs; keeping the default tau")
        budgets[tier] = TierBudget(grid or defaults[tier].grid, tau if tau is not None else defaults[tier].tau)
        derived[tier] = (bool(grid), tau is not None)
    return Calibration(efforts, tiers, budgets, derived, notes)
