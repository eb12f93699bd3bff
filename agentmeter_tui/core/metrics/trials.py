"""Every trial counted: per cell and per configuration, the figures of all trials, not one.

The AgentMeter tables score one selected run per cell (``attempts.select_attempt``); a leaderboard run
of 5 trials per task wants every trial in view. A cell's *trials* are its valid attempts (every
trial, every retry; infra-invalid ones are our side's failure and never the configuration's).

- pass@k: the unbiased estimator of Chen et al. 2021 (HumanEval, Eq. 1), 1 - C(n-c, k) / C(n, k):
  the chance that at least one of k trials drawn without replacement from the n passes;
- pass^k: the tau-bench estimator (Yao et al. 2024), C(c, k) / C(n, k): the chance that all k pass;
- Wilson's score interval for a cell's pass rate (95 %), which stays inside [0, 1] and is not
  the empty [p, p] of the normal interval at 0 or n passes.

A configuration's figures weigh every task equally (a task with more trials is not worth more);
a task without a trial counts zero in pass@k, pass^k and the mean reward, as a missing cell
counts zero in Table 2.
"""

from __future__ import annotations

import math
from functools import lru_cache
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .attempts import Attempt

WILSON_Z = 1.959963984540054  # the standard normal's 97.5 % point: a two-sided 95 % interval


@lru_cache(maxsize=4096)  # a grid's cells share a few (n, c, k): each computed once
def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. 2021: 1 - C(n-c, k) / C(n, k), for 1 <= k <= n."""
    _check_k(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@lru_cache(maxsize=4096)
def pass_hat_k(n: int, c: int, k: int) -> float:
    """tau-bench's pass^k: C(c, k) / C(n, k), for 1 <= k <= n."""
    _check_k(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_k(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")


def wilson(c: int, n: int, z: float = WILSON_Z) -> tuple[float, float] | None:
    """Wilson's score interval for c passes in n trials; None without a trial."""
    if n <= 0:
        return None
    p = c / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Spread:
    """Mean, min and max of a per-trial figure; None when a trial had no value (an unpriced run)."""

    mean: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Spread:
        known = [v for v in values if v is not None]
        if not values or len(known) < len(values):
            return cls(None, None, None)
        return cls(sum(known) / len(known), min(known), max(known))

    def to_dict(self) -> dict[str, float | None]:
        return {"mean": self.mean, "min": self.low, "max": self.high}


@dataclass(frozen=True)
class TrialStats:
    """A cell's (or a configuration's) figures over every trial."""

    trials: int
    passes: int
    mean_reward: float | None  # None for a cell without a trial
    stderr: float | None  # standard error of the mean reward over trials; None below two trials
    pass_at: tuple[float, ...]  # pass@1 .. pass@k_max
    pass_hat: tuple[float, ...]  # pass^1 .. pass^k_max
    cost: Spread
    tokens: Spread
    wilson: tuple[float, float] | None = None  # a cell's pass rate; None for a configuration

    def to_dict(self) -> dict:
        out = {"trials": self.trials, "passes": self.passes, "mean_reward": self.mean_reward,
               "stderr": self.stderr, "pass_at_k": {str(k): v for k, v in enumerate(self.pass_at, 1)},
               "pass_hat_k": {str(k): v for k, v in enumerate(self.pass_hat, 1)},
               "cost_per_trial": self.cost.to_dict(), "tokens_per_trial": self.tokens.to_dict()}
        if self.wilson is not None or self.trials == 0:
            out["pass_rate_wilson"] = None if self.wilson is None else {"low": self.wilson[0], "high": self.wilson[1]}
        return out


@lru_cache(maxsize=1024)
def _curves(n: int, c: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return (tuple(pass_at_k(n, c, k) for k in range(1, n + 1)), tuple(pass_hat_k(n, c, k) for k in range(1, n + 1)))


def cell_stats(attempts: Sequence[Attempt]) -> TrialStats:
    """Every valid attempt of one (task, configuration) cell."""
    trials = [r for r in attempts if r.valid]
    n, c = len(trials), sum(r.success for r in trials)
    rewards = [r.reward for r in trials]
    mean = sum(rewards) / n if n else None
    stderr = None
    if n >= 2 and mean is not None:
        variance = sum((x - mean) ** 2 for x in rewards) / (n - 1)  # the sample variance (ddof 1)
        stderr = math.sqrt(variance / n)
    at, hat = _curves(n, c)
    return TrialStats(n, c, mean, stderr, at, hat, Spread.of([r.cost for r in trials]),
                      Spread.of([float(r.raw_tokens) for r in trials]), wilson(c, n))


def config_stats(cells: Mapping[str, TrialStats], tasks: Sequence[str], attempts: Sequence[Attempt]) -> TrialStats:
    """A configuration over ``tasks``: pass@k and pass^k are the mean over tasks for every k up to the
    fewest trials of a task that has any; the mean reward is the mean of the task means; its standard
    error the trial-to-trial one with the tasks held fixed, sqrt(sum of the cells' SE^2) / tasks."""
    present = [cells[t] for t in tasks if t in cells and cells[t].trials]
    n_tasks = len(tasks)
    k_max = min((s.trials for s in present), default=0)
    pass_at = tuple(sum(s.pass_at[k] for s in present) / n_tasks for k in range(k_max))
    pass_hat = tuple(sum(s.pass_hat[k] for s in present) / n_tasks for k in range(k_max))
    means = [s.mean_reward for s in present if s.mean_reward is not None]  # each: it has a trial
    mean = sum(means) / n_tasks if n_tasks and means else None
    errors = [s.stderr for s in present if s.stderr is not None]
    stderr = None
    if present and len(present) == n_tasks and len(errors) == len(present):
        stderr = math.sqrt(sum(e ** 2 for e in errors)) / n_tasks
    scored = set(tasks)
    trials = [r for r in attempts if r.valid and r.task in scored]
    return TrialStats(sum(s.trials for s in present), sum(s.passes for s in present), mean, stderr, pass_at,
                      pass_hat, Spread.of([r.cost for r in trials]), Spread.of([float(r.raw_tokens) for r in trials]))
