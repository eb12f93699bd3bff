"""The AgentMeter formulas (seed 000, Eqs. 3-8) and the per-configuration row of Table 2.

Conventions, all from the paper: a tier's denominator is its task count |T_g|, so a task
without a valid run counts zero; at a budget point only a passing, priced run within the
budget contributes its quality; an expensive failure is a valid, non-passing run whose
cost exceeds tau_g. A run of unknown cost never fits a budget and is never called
expensive: there is no evidence either way, and the report says how many there were.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..vocab import TIERS
from .attempts import Config, Attempt

DEFAULT_ALPHA = 0.6


@dataclass(frozen=True)
class TierBudget:
    """A tier's budget grid B_g (USD) and expensive-failure threshold tau_g (USD)."""

    grid: tuple[float, ...]
    tau: float

    def __post_init__(self) -> None:
        if not self.grid:
            raise ValueError("a budget grid needs at least one point")
        object.__setattr__(self, "grid", tuple(sorted(float(b) for b in self.grid)))


# Table 1 of seed 000: the defaults until `agentmeter calibrate` derives a suite's own.
TABLE1: dict[str, TierBudget] = {
    "easy": TierBudget((0.01, 0.04, 0.10, 0.18, 0.26), 0.12),
    "medium": TierBudget((0.03, 0.07, 0.24, 0.58, 0.82), 0.40),
    "hard": TierBudget((0.06, 0.21, 0.87, 2.34, 3.47), 2.18),
}


def _check(runs: Sequence[Attempt], n_tasks: int) -> None:
    if n_tasks <= 0:
        raise ValueError("a tier with no tasks has no score")
    if len(runs) > n_tasks:
        raise ValueError(f"{len(runs)} selected runs for {n_tasks} tasks: select one run per task first")


def success_rate(runs: Sequence[Attempt], n_tasks: int) -> float:
    """SR_g (Eq. 6): mean quality over the tier's tasks."""
    _check(runs, n_tasks)
    return sum(r.reward for r in runs) / n_tasks


def cbq(runs: Sequence[Attempt], n_tasks: int, budget: float) -> float:
    """CBQ_g(c, b) (Eq. 3). Missing, invalid, failed, unpriced and over-budget runs add zero."""
    _check(runs, n_tasks)
    return sum(r.reward for r in runs if r.success and r.cost is not None and r.cost <= budget) / n_tasks


def cost_aubqc(runs: Sequence[Attempt], n_tasks: int, grid: Sequence[float]) -> float:
    """CostAUBQC_g (Eq. 4): the mean of CBQ over the budget grid."""
    if not grid:
        raise ValueError("a budget grid needs at least one point")
    return sum(cbq(runs, n_tasks, b) for b in grid) / len(grid)


def efr(runs: Sequence[Attempt], n_tasks: int, tau: float) -> float:
    """EFR_g (Eq. 5): the share of tasks whose run failed and cost more than tau."""
    _check(runs, n_tasks)
    return sum(1 for r in runs if r.valid and not r.success and r.cost is not None and r.cost > tau) / n_tasks


def tier_score(sr: float, aubqc: float, efr_value: float, alpha: float = DEFAULT_ALPHA) -> float:
    """TierScore_g (Eq. 7)."""
    return (alpha * sr + (1 - alpha) * aubqc) * (1 - efr_value)


def agentmeter_score(tier_scores: Mapping[str, float | None]) -> float | None:
    """AMS (Eq. 8): the equal-weight mean of the tier scores.

    A tier with no tasks has no score and is left out of the mean (the report notes it);
    with no scored tier at all there is no AMS.
    """
    present = [s for s in tier_scores.values() if s is not None]
    return sum(present) / len(present) if present else None


def per_pass(total: float | None, passes: int) -> float | None:
    """Tok/Pass and USD/Pass: None without a pass (or without a total), never a division error."""
    if not passes or total is None:
        return None
    return total / passes


def delta_best(ams: Mapping[Config, float | None]) -> dict[Config, float | None]:
    """Same-model AMS gap to that model's best CLI (0 for the best; lower is better)."""
    best: dict[str, float] = {}
    for (model, _cli), value in ams.items():
        if value is not None:
            best[model] = max(best.get(model, value), value)
    return {(m, c): (best[m] - v if v is not None else None) for (m, c), v in ams.items()}


@dataclass(frozen=True)
class TierStats:
    """One configuration on one tier: every term of Eq. 7."""

    n_tasks: int
    passes: int
    sr: float
    cbq: tuple[float, ...]  # one per budget point, in grid order
    aubqc: float
    efr: float
    score: float


def tier_stats(runs: Sequence[Attempt], n_tasks: int, budget: TierBudget, alpha: float = DEFAULT_ALPHA) -> TierStats:
    sr = success_rate(runs, n_tasks)
    points = tuple(cbq(runs, n_tasks, b) for b in budget.grid)
    aubqc = sum(points) / len(points)
    failure = efr(runs, n_tasks, budget.tau)
    return TierStats(n_tasks, sum(1 for r in runs if r.success), sr, points, aubqc, failure,
                     tier_score(sr, aubqc, failure, alpha))


@dataclass
class ConfigScore:
    """A row of Table 2 plus the detail behind it."""

    model: str
    cli: str
    n_tasks: int
    passes: int
    passes_by_tier: dict[str, int]
    tokens_per_pass: float | None
    usd_per_pass: float | None
    tiers: dict[str, TierStats | None]
    ams: float | None
    attempts: int = 0
    invalid_attempts: int = 0
    unpriced_attempts: int = 0
    missing_tasks: int = 0
    delta_best: float | None = None
    rubric_winrate: float | None = None
    usd_total: float | None = None  # every attempt's cost; None when one was unpriced
    extra: dict = field(default_factory=dict)

    @property
    def config(self) -> Config:
        return (self.model, self.cli)

    @property
    def tier_scores(self) -> dict[str, float | None]:
        return {t: (s.score if s is not None else None) for t, s in self.tiers.items()}


def score_configuration(config: Config, attempts: Iterable[Attempt], selected: Mapping[str, Attempt],
                        task_tiers: Mapping[str, str | None], budgets: Mapping[str, TierBudget],
                        alpha: float = DEFAULT_ALPHA) -> ConfigScore:
    """Score one configuration.

    ``attempts``: every attempt it made (all trials, infra-invalid retries included): those on
    the scored tasks make the token and cost sums of Tok/Pass and USD/Pass, over the passes
    among them.
    ``selected``: task -> the one run its cell contributes. ``task_tiers``: every task of the
    suite (or of the subset being scored) -> its tier, None when uncalibrated.
    """
    tokens = 0
    usd = 0.0
    count = invalid = unpriced = run_passes = 0
    for run in attempts:
        if run.task not in task_tiers:
            continue
        count += 1
        tokens += run.raw_tokens
        invalid += not run.valid
        run_passes += run.success
        if run.cost is None:
            unpriced += 1
        else:
            usd += run.cost
    by_tier: dict[str, list[Attempt]] = {t: [] for t in TIERS}
    sizes = dict.fromkeys(TIERS, 0)
    for task, tier in task_tiers.items():
        if tier in sizes:
            sizes[tier] += 1
            if task in selected:
                by_tier[tier].append(selected[task])
    tiers = {t: (tier_stats(by_tier[t], sizes[t], budgets[t], alpha) if sizes[t] else None) for t in TIERS}
    chosen = [selected[t] for t in task_tiers if t in selected]
    return ConfigScore(
        model=config[0], cli=config[1], n_tasks=len(task_tiers), passes=sum(r.success for r in chosen),
        passes_by_tier={t: sum(r.success for r in by_tier[t]) for t in TIERS},
        tokens_per_pass=per_pass(tokens, run_passes),
        usd_per_pass=per_pass(None if unpriced else usd, run_passes),
        tiers=tiers, ams=agentmeter_score({t: (s.score if s else None) for t, s in tiers.items()}),
        attempts=count, invalid_attempts=invalid, unpriced_attempts=unpriced,
        missing_tasks=len(task_tiers) - len(chosen), usd_total=None if unpriced else usd,
    )
