"""Provides :class:`GridState`: the model x CLI grid's cells, kept up to date incrementally.

Finished trials come from the store once, at start; after that the feed's meters update
single trials, and only the cells they belong to are marked dirty, so the grid screen
redraws a handful of cells per tick instead of the whole table. No Textual here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.run.control import Meter
from ..core.usage import TOKEN_CLASSES
from ..core.vocab import ACTIVE_STATUSES, FINAL_STATUSES, counts_as_done, source_label

Config = tuple[str, str]  # (model, cli)


@dataclass(slots=True)
class TrialSummary:
    id: int
    model: str
    cli: str
    task: str
    trial: int
    status: str
    reason: str | None
    raw: int
    cost: float | None
    flags: tuple[str, ...] = ()
    source: str | None = None  # where an imported trial came from (None: run here)
    node: str | None = None  # the fleet node it ran on (swarm sandbox); None elsewhere

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TrialSummary:
        flags = row.get("flags")
        if isinstance(flags, str):
            try:
                flags = orjson.loads(flags)
            except orjson.JSONDecodeError:
                flags = [flags]
        return cls(row["id"], row["model"], row["cli"], row["task_id"], row["trial_index"], row["status"],
                   row.get("reason"), sum(int(row.get(c) or 0) for c in TOKEN_CLASSES), row.get("cost_usd"),
                   tuple(flags or ()), source_label(row), row.get("node"))

    @classmethod
    def from_meter(cls, trial_id: int, meter: Meter) -> TrialSummary:
        """``trial_id``: the meter's id, which it has once the store has the trial."""
        return cls(trial_id, meter["model"], meter["cli"], meter["task"], meter["trial"], meter["status"],
                   meter.get("reason"), sum((meter.get("tokens") or {}).values()), meter.get("cost_usd"),
                   tuple(meter.get("flags") or ()), node=meter.get("node"))


@dataclass
class CellStats:
    done: int = 0
    total: int = 0
    running: int = 0
    passes: int = 0
    raw: int = 0
    usd: float = 0.0
    unpriced: int = 0
    killed: int = 0
    errored: int = 0
    invalid: int = 0
    thrash: int = 0
    imported: int = 0
    ams: float | None = None

    @property
    def empty(self) -> bool:
        return self.done == 0 and self.running == 0 and self.invalid == 0


class GridState:
    def __init__(self, models: list[str], clis: list[str], per_cell_total: int = 0):
        self.models, self.clis = list(models), list(clis)
        self.per_cell_total = per_cell_total
        self.trials: dict[int, TrialSummary] = {}
        self.by_cell: dict[Config, set[int]] = defaultdict(set)
        self.ams: dict[Config, float | None] = {}
        self.dirty: set[Config] = set()
        self.shape_changed = False
        self.finished_version = 0  # grows whenever a trial reaches a final status (AMS must be redone)
        self._cells: dict[Config, CellStats] = {}  # sums of cells whose trials did not change since

    def load(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self.upsert(TrialSummary.from_row(row))

    def reconcile(self, rows: list[dict[str, Any]], followed: set[int]) -> None:
        """The store's rows over what the feed said: a final row always wins (the store is the
        truth once a trial ends, and a client can miss the feed's last word on it); a row still
        running yields to the feed for the trials it follows (``followed``: their live meters
        are newer than the row)."""
        for row in rows:
            trial = TrialSummary.from_row(row)
            if trial.status not in FINAL_STATUSES and trial.id in followed:
                continue
            if self.trials.get(trial.id) != trial:
                self.upsert(trial)

    def upsert(self, trial: TrialSummary) -> None:
        config = (trial.model, trial.cli)
        if trial.model not in self.models:
            self.models.append(trial.model)
            self.shape_changed = True
        if trial.cli not in self.clis:
            self.clis.append(trial.cli)
            self.shape_changed = True
        old = self.trials.get(trial.id)
        if counts_as_done(trial.status) and (old is None or old.status != trial.status):
            self.finished_version += 1
        self.trials[trial.id] = trial
        self.by_cell[config].add(trial.id)
        self.dirty.add(config)
        self._cells.pop(config, None)

    def apply_meters(self, meters: list[Meter]) -> None:
        for meter in meters:
            trial_id = meter.get("id")
            if trial_id is not None:
                self.upsert(TrialSummary.from_meter(trial_id, meter))

    def set_ams(self, ams: dict[Config, float | None]) -> None:
        for config, value in ams.items():
            if self.ams.get(config) != value:
                self.ams[config] = value
                self.dirty.add(config)
                self._cells.pop(config, None)

    def take_dirty(self) -> set[Config]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def cell(self, config: Config) -> CellStats:
        """A cell's sums (cached until one of its trials changes: the run bar sums every cell
        several times a second, and a thousand running trials made that a visible cost)."""
        cached = self._cells.get(config)
        if cached is None:
            cached = self._cells[config] = self._sum(config)
        return cached

    def _sum(self, config: Config) -> CellStats:
        stats = CellStats(total=self.per_cell_total, ams=self.ams.get(config))
        for trial_id in self.by_cell.get(config, ()):
            trial = self.trials[trial_id]
            status = trial.status
            stats.raw += trial.raw
            if trial.cost is None:
                stats.unpriced += 1
            else:
                stats.usd += trial.cost
            if "thrash" in trial.flags:
                stats.thrash += 1
            if trial.source is not None:
                stats.imported += 1
            if counts_as_done(status):
                stats.done += 1
                stats.passes += status == "passed"
                stats.killed += status == "killed"
                stats.errored += status == "errored"
            elif status in ACTIVE_STATUSES:
                stats.running += 1
            elif status == "infra-invalid":
                stats.invalid += 1
        stats.total = max(stats.total, stats.done + stats.running)
        return stats

    def cell_trials(self, config: Config) -> list[TrialSummary]:
        return sorted((self.trials[i] for i in self.by_cell.get(config, ())), key=lambda t: (t.task, t.trial, t.id))

    def nodes_of(self, config: Config) -> dict[str, int]:
        """Trials per fleet node of a cell (none when its sandbox places no trials on nodes)."""
        counts: dict[str, int] = {}
        for trial_id in self.by_cell.get(config, ()):
            node = self.trials[trial_id].node
            if node is not None:
                counts[node] = counts.get(node, 0) + 1
        return dict(sorted(counts.items()))

    def totals(self) -> CellStats:
        total = CellStats()
        for config in list(self.by_cell):
            cell = self.cell(config)
            for name in ("done", "running", "passes", "raw", "usd", "unpriced", "killed", "errored", "invalid",
                         "thrash", "imported"):
                setattr(total, name, getattr(total, name) + getattr(cell, name))
        total.total = self.per_cell_total * len(self.models) * len(self.clis)
        return total
