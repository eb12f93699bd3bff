"""The hand-scored rubric (seed 004): cell medians, winrates with ties, the honesty gate.

Scores are 0-3 per trial (0 refused or unusable, 1 partial with manual rework, 2 passed
with one loss, 3 passed everything first time). A cell (task x configuration) is the
median of its trials' latest scores. A configuration wins a task when its cell equals or
beats every other scored cell of that task, so ties are wins for all tied and winrates can
sum above 1; it loses the task when it is strictly below the top.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .attempts import Config

MIN_LOSSES = 2
MAX_WINRATE = 0.80
RUBRIC = {0: "refused or unusable", 1: "partial, manual rework", 2: "passed with one loss",
          3: "passed all checks first time"}


def cell_medians(scores: Iterable[tuple[Config, str, float]]) -> dict[tuple[Config, str], float]:
    """(configuration, task) -> median of its scored trials. Input: one (config, task, score) per trial
    (a float: an adjudicated score may be the median of two reviewers')."""
    cells: dict[tuple[Config, str], list[float]] = defaultdict(list)
    for config, task, score in scores:
        cells[(config, task)].append(score)
    return {key: float(statistics.median(values)) for key, values in cells.items()}


def task_winners(medians: Mapping[tuple[Config, str], float]) -> dict[str, list[Config]]:
    """task -> the configurations at its top score (several on a tie)."""
    top: dict[str, float] = {}
    for (_config, task), value in medians.items():
        top[task] = max(top.get(task, value), value)
    winners: dict[str, list[Config]] = defaultdict(list)
    for (config, task), value in medians.items():
        if value == top[task]:
            winners[task].append(config)
    return dict(winners)


@dataclass(frozen=True)
class Standing:
    """A configuration's rubric record. ``tasks``: tasks scored in the suite (the denominator)."""

    wins: int
    losses: int
    tasks: int

    @property
    def scored(self) -> int:
        """Tasks on which this configuration has a score (a win or a loss)."""
        return self.wins + self.losses

    @property
    def unscored(self) -> int:
        return self.tasks - self.scored

    @property
    def winrate(self) -> float | None:
        return self.wins / self.tasks if self.tasks else None


def standings(medians: Mapping[tuple[Config, str], float]) -> dict[Config, Standing]:
    """Wins and losses per configuration; winrate = wins / tasks scored in the suite.

    A task is scored when any configuration has a score on it; a configuration without a
    score there neither wins nor loses it (seed 004: a loss is a score below the top).
    """
    winners = task_winners(medians)
    tally: dict[Config, list[int]] = defaultdict(lambda: [0, 0])
    for config, task in medians:
        tally[config][0 if config in winners[task] else 1] += 1
    return {config: Standing(w, l, len(winners)) for config, (w, l) in tally.items()}


def own_configurations(own: str, configs: Iterable[Config]) -> list[Config]:
    """The configurations a suite's ``own`` names: ``model|cli`` exactly, or every one of a CLI."""
    if "|" in own:
        model, cli = own.split("|", 1)
        return [c for c in configs if c == (model, cli)]
    return [c for c in configs if c[1] == own]


@dataclass(frozen=True)
class GateResult:
    passed: bool
    message: str


def honesty_gate(own: str, table: Mapping[Config, Standing], configs: Iterable[Config] | None = None,
                 min_losses: int = MIN_LOSSES, max_winrate: float = MAX_WINRATE) -> GateResult:
    """Seed 004's gate: every configuration of the suite's own tool must lose at least
    ``min_losses`` tasks and keep its winrate below ``max_winrate``; otherwise the report fails."""
    mine = own_configurations(own, configs if configs is not None else table)
    if not mine:
        return GateResult(False, f"honesty gate: the suite names its own tool '{own}', but no configuration "
                                 "matches it (use 'model|cli' or a CLI name)")
    problems, summary = [], []
    tasks = max((s.tasks for s in table.values()), default=0)
    for config in mine:
        standing = table.get(config, Standing(0, 0, tasks))
        name = "/".join(config)
        rate = standing.winrate
        shown = f"{rate:.2f}" if rate is not None else "n/a"
        unscored = f", unscored on {standing.unscored}" if standing.unscored else ""
        summary.append(f"{name}: {standing.losses} losses of {standing.tasks} scored tasks{unscored}, "
                       f"winrate {shown}")
        if standing.losses < min_losses:
            problems.append(f"{name} loses {standing.losses} of {standing.tasks} scored tasks{unscored} "
                            f"(it must lose at least {min_losses})")
        if rate is not None and rate >= max_winrate:
            problems.append(f"{name} has winrate {rate:.2f} (it must stay below {max_winrate:.2f})")
    if problems:
        return GateResult(False, f"honesty gate failed for the suite's own tool '{own}': " + "; ".join(problems)
                          + ". A result this favourable needs a changed, documented rubric, not edited scores.")
    return GateResult(True, f"honesty gate passed for '{own}': " + "; ".join(summary))
