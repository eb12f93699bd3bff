"""The attempt outcome the metrics read, and the rules that pick one trial per cell.

A :class:`Attempt` is one attempt of one task by one configuration, reduced to what the
formulas need. The metrics never touch the store: the reporting layer reads rows into
attempts (one SQL query) and hands them over, so every formula is tested on plain lists.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..vocab import TrialStatus

# Statuses whose verifier verdict stands: the agent ran to the end and was judged.
JUDGED = frozenset({TrialStatus.PASSED, TrialStatus.FAILED})

Config = tuple[str, str]  # (model, cli): the deployed unit
Selection = Literal["latest", "median"]
SELECTIONS: dict[str, str] = {
    "latest": "latest completed trial per cell (the AgentMeter paper's rule)",
    "median": "median trial per cell (the rubric's rule; the lower middle when the count is even)",
}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt. ``cost`` is None when the attempt could not be priced (never read as $0)."""

    task: str
    model: str
    cli: str
    trial: int = 0
    status: str = "passed"
    passed: bool = False
    quality: float = 0.0
    raw_tokens: int = 0
    cost: float | None = 0.0
    attempt: int = 0
    turns: int = 0
    tool_calls: int = 0
    finished_at: str | None = None
    id: int | None = None

    @property
    def config(self) -> Config:
        return (self.model, self.cli)

    @property
    def valid(self) -> bool:
        """Attributable to the configuration: infra-invalid attempts are our side's failure."""
        return self.status != TrialStatus.INFRA_INVALID

    @property
    def success(self) -> bool:
        """y_i: the task counts as passed."""
        return self.passed and self.valid

    @property
    def reward(self) -> float:
        """R_i: the verifier's quality for a judged attempt; non-completion contributes zero."""
        return self.quality if self.status in JUDGED else 0.0


def _recency(run: Attempt) -> tuple:
    # ISO timestamps of one writer compare as strings; trial index, attempt and id break ties
    # deterministically (imported records may all carry the same time or none).
    return (run.finished_at or "", run.trial, run.attempt, run.id or 0)


def _goodness(run: Attempt) -> tuple:
    # Higher is better: quality, then pass, then lower cost (an unpriced attempt ranks as the worst).
    cost_key = -run.cost if run.cost is not None else float("-inf")
    return (run.reward, run.success, cost_key, _recency(run))


def group_cells(runs: Iterable[Attempt]) -> dict[tuple[Config, str], list[Attempt]]:
    """All attempts per (configuration, task) cell, in input order."""
    cells: dict[tuple[Config, str], list[Attempt]] = defaultdict(list)
    for run in runs:
        cells[(run.config, run.task)].append(run)
    return cells


def select_attempt(attempts: list[Attempt], rule: Selection = "latest") -> Attempt | None:
    """The one attempt a cell contributes, or None when no attempt is attributable (a missing cell).

    ``latest``: the most recently finished valid attempt. ``median``: the valid attempts
    ordered by outcome (quality, pass, cheaper first), the middle one, the lower middle for
    an even count, so the chosen attempt is a real trial whose figures belong together.
    """
    valid = [r for r in attempts if r.valid]
    if not valid:
        return None
    if rule == "latest":
        return max(valid, key=_recency)
    if rule == "median":
        ordered = sorted(valid, key=_goodness)
        return ordered[(len(ordered) - 1) // 2]
    raise ValueError(f"unknown selection rule {rule!r}; use one of {', '.join(SELECTIONS)}")


def select_attempts(runs: Iterable[Attempt], rule: Selection = "latest") -> dict[tuple[Config, str], Attempt]:
    """One attempt per (configuration, task) cell that has a valid attempt."""
    chosen = {}
    for key, attempts in group_cells(runs).items():
        run = select_attempt(attempts, rule)
        if run is not None:
            chosen[key] = run
    return chosen
