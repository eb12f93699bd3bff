"""Two runs compared (``agentmeter report --compare A B``): which tasks flipped, how far rewards and
scores moved, and whether that is more than noise.

Both sides are scored on the tasks they share, with A's tiers, budgets and alpha. Per cell (task,
configuration in both) the selected run's pass on each side (``--select``) and the mean reward
over every trial; per configuration AMS and Pass on each side and the paired difference B - A:
one two-level bootstrap (``metrics.intervals``) over both sides at once, so each resample draws the
same tasks for A and B and the difference is paired; its 95 % interval and the share of
resamples in which each side leads (ties lead for neither).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..metrics.intervals import DEFAULT_RESAMPLES, DEFAULT_SEED, MIN_TASKS, TOO_FEW, Interval
from ..metrics.attempts import Config, Attempt, Selection, select_attempts
from .build import build_report
from .cells import DASH, _md, _table, fmt_score

SIDES = ("A", "B")


def _change(a: float | None, b: float | None) -> float | None:
    """b - a, None when either side has no value."""
    return None if a is None or b is None else b - a


@dataclass(frozen=True)
class CellChange:
    task: str
    config: Config
    passed: tuple[bool | None, bool | None]  # the selected run's pass on A and B (None: no valid run)
    reward: tuple[float | None, float | None]  # mean reward over every trial

    @property
    def flipped(self) -> bool:
        return None not in self.passed and self.passed[0] != self.passed[1]

    @property
    def reward_change(self) -> float | None:
        """B's mean reward less A's; None when a side has no valid trial."""
        return _change(*self.reward)

    @property
    def changed(self) -> bool:
        """Flipped, or its mean reward moved: the cells a comparison lists."""
        return self.flipped or ((d := self.reward_change) is not None and abs(d) > 1e-9)


@dataclass(frozen=True)
class ConfigChange:
    config: Config
    ams: tuple[float | None, float | None]
    passes: tuple[int, int]
    difference: Interval  # of AMS(B) - AMS(A), the every-trial estimates
    b_ahead: float | None
    a_ahead: float | None
    estimate: float | None = None  # the every-trial AMS(B) - AMS(A), the centre of that interval


@dataclass
class RunComparison:
    labels: tuple[str, str]
    selection: str
    tasks: list[str]
    only: tuple[list[str], list[str]]  # tasks on one side only: left out
    configs: list[ConfigChange]
    cells: list[CellChange]
    resamples: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.labels[0], "b": self.labels[1], "selection": self.selection, "tasks": len(self.tasks),
            "tasks_only_in_a": self.only[0], "tasks_only_in_b": self.only[1],
            "method": f"paired two-level bootstrap over the shared tasks, {self.resamples} resamples, seed {self.seed}",
            "min_tasks": MIN_TASKS,
            "configurations": [{"model": c.config[0], "cli": c.config[1], "ams_a": c.ams[0], "ams_b": c.ams[1],
                                "passes_a": c.passes[0], "passes_b": c.passes[1],
                                "ams_difference": {"estimate": c.estimate, **c.difference.to_dict()},
                                "share_b_ahead": c.b_ahead,
                                "share_a_ahead": c.a_ahead} for c in self.configs],
            "cells": [{"task": c.task, "model": c.config[0], "cli": c.config[1], "passed_a": c.passed[0],
                       "passed_b": c.passed[1], "flipped": c.flipped, "mean_reward_a": c.reward[0],
                       "mean_reward_b": c.reward[1]} for c in self.cells],
        }


def _tag(runs: Sequence[Attempt], side: str, tasks: set[str]) -> list[Attempt]:
    return [replace(r, model=f"{side}\x1f{r.model}") for r in runs if r.task in tasks]


def _success(run: Attempt | None) -> bool | None:
    return None if run is None else run.success


def _mean_reward(runs: Sequence[Attempt]) -> float | None:
    valid = [r.reward for r in runs if r.valid]
    return sum(valid) / len(valid) if valid else None


def compare_runs(a: Sequence[Attempt], b: Sequence[Attempt], tiers: Mapping[str, str | None], tiers_b: Mapping[str, str | None],
                 labels: tuple[str, str], *, scoring: Any | None = None, selection: Selection = "latest",
                 resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> RunComparison:
    shared = [t for t in tiers if t in tiers_b]
    keep = set(shared)
    both = sorted({r.config for r in a} & {r.config for r in b}, key=lambda c: (c[0], c[1]))
    combined = _tag([r for r in a if r.config in both], "A", keep) + _tag([r for r in b if r.config in both], "B", keep)
    configs = [(f"{side}\x1f{m}", c) for m, c in both for side in SIDES]
    report = build_report(combined, suite="compare", task_tiers={t: tiers[t] for t in shared}, configs=configs,
                          scoring=scoring, selection=selection, resamples=resamples, seed=seed)
    rows = {r.config: r for r in report.configurations}
    iv = report.intervals
    if iv is None:  # build_report bootstraps only for a positive count, and the comparison is that bootstrap
        raise ValueError(f"a comparison needs a positive number of resamples, not {resamples}")
    changes = []
    for m, c in both:
        side_a, side_b = (f"A\x1f{m}", c), (f"B\x1f{m}", c)
        cmp = iv.compare(side_b, side_a)
        estimate = _change(iv.estimates["ams"][side_a], iv.estimates["ams"][side_b])
        changes.append(ConfigChange((m, c), (rows[side_a].ams, rows[side_b].ams),
                                    (rows[side_a].passes, rows[side_b].passes), cmp.difference, cmp.a_ahead,
                                    cmp.b_ahead, estimate))
    chosen = select_attempts(combined, selection)
    cells = []
    for task in shared:
        for m, c in both:
            pick_a, pick_b = (chosen.get(((f"{s}\x1f{m}", c), task)) for s in SIDES)
            trials_a, trials_b = ([r for r in combined if r.task == task and r.config == (f"{s}\x1f{m}", c)]
                                  for s in SIDES)
            cells.append(CellChange(task, (m, c), (_success(pick_a), _success(pick_b)),
                                    (_mean_reward(trials_a), _mean_reward(trials_b))))
    return RunComparison(labels, selection, shared, ([t for t in tiers if t not in keep],
                                                     [t for t in tiers_b if t not in keep]),
                         changes, cells, resamples, seed)


def store_side(path: Path, suite: str | None) -> tuple[list[Attempt], dict[str, str | None], Any | None, str]:
    """(runs, task tiers, scoring, label) of one store's suite (``suite``, else its latest);
    LookupError naming the store when it or the suite is missing."""
    from ..store import Store
    from .build import attempts_from_store, suite_settings

    if not path.is_file():
        raise LookupError(f"no store at {path}")
    store = Store.for_reading(path)
    try:
        row = store.suite_row(suite)
        if row is None:
            raise LookupError(f"no suite {suite!r} in {path}" if suite else f"no suite in {path}")
        scoring = suite_settings(row)[0]
        return attempts_from_store(store, row["id"]), store.views.task_tiers(row["id"]), scoring, f"{path} (suite {row['id']})"
    finally:
        store.close()


def compare_stores(a: Path, b: Path, suite: str | None = None, *, selection: Selection = "latest",
                   resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> RunComparison:
    """Two stores' suites compared, scored with A's settings (``report --compare A B``)."""
    runs_a, tiers_a, scoring, label_a = store_side(Path(a), suite)
    runs_b, tiers_b, _, label_b = store_side(Path(b), suite)
    return compare_runs(runs_a, runs_b, tiers_a, tiers_b, (label_a, label_b), scoring=scoring, selection=selection,
                        resamples=resamples, seed=seed)


def _yes(value: bool | None) -> str:
    return DASH if value is None else ("pass" if value else "fail")


def _signed(value: float | None) -> str:
    return DASH if value is None else f"{value:+.3f}"


def render_markdown(cmp: RunComparison) -> str:
    lines = ["# AgentMeter comparison", "", f"- A: `{_md(cmp.labels[0])}`", f"- B: `{_md(cmp.labels[1])}`",
             f"- Shared tasks: {len(cmp.tasks)}" + (f"; left out, only in A: {len(cmp.only[0])}, only in B: "
                                                    f"{len(cmp.only[1])}" if any(cmp.only) else ""),
             f"- Trial selection for AMS, Pass and flips: `{cmp.selection}`; mean rewards over every trial", "",
             "## Per configuration", "",
             "AMS A and B: Table 2's, on the selection named. Δ = AMS(B) − AMS(A) of the every-trial estimates "
             "(each cell's trials averaged; with one trial per cell the same) and its 95 % interval from a paired "
             f"two-level bootstrap over the shared tasks ({cmp.resamples} resamples, seed {cmp.seed}; the same "
             "tasks for both sides, each side's trials drawn on their own, as two runs are independent); "
             "P(B ahead) and P(A ahead): share of resamples in which that side's AMS is higher. Below "
             f"{MIN_TASKS} tasks: {TOO_FEW}.", ""]
    rows = []
    for c in cmp.configs:
        interval = TOO_FEW if c.difference.too_few else f"[{fmt_score(c.difference.low)}, {fmt_score(c.difference.high)}]"
        delta = c.estimate
        share = (lambda v: DASH if v is None else f"{v * 100:.0f} %")
        rows.append([_md(c.config[0]), _md(c.config[1]), f"{c.passes[0]} → {c.passes[1]}", fmt_score(c.ams[0]),
                     fmt_score(c.ams[1]), _signed(delta), interval, share(c.b_ahead),
                     share(c.a_ahead)])
    lines += _table(["Model", "CLI", "Pass A → B", "AMS A", "AMS B", "Δ", "Δ 95 %", "P(B ahead)", "P(A ahead)"],
                    rows, "llrrrrrrr")
    changed = [c for c in cmp.cells if c.changed]
    lines += ["", "## Per task: flips and reward changes", "",
              f"{sum(c.flipped for c in cmp.cells)} flip(s) of the selected run's pass over {len(cmp.cells)} cells; "
              "cells whose pass and mean reward are unchanged are not listed.", ""]
    cells = [[_md(c.task), _md(f"{c.config[0]}/{c.config[1]}"), _yes(c.passed[0]), _yes(c.passed[1]),
              "**flip**" if c.flipped else "", fmt_score(c.reward[0]), fmt_score(c.reward[1]),
              _signed(c.reward_change)] for c in changed]
    lines += _table(["Task", "Configuration", "A", "B", "", "Reward A", "Reward B", "Δ reward"], cells, "llllrrrr")
    return "\n".join(lines) + "\n"
