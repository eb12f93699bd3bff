"""The site's index as a leaderboard: configurations ranked by AMS with its interval, passes, total
cost and trials; a task-by-configuration heatmap of pass rates over every trial, marked where a
compared run (``report --compare A B --format html``) flipped the selected run's pass; and the
comparison's own page (per configuration the paired AMS difference, per task the flips).

Everything here is prepared data for the templates; names go through :class:`~.model.Names`
(labels in a blind site), and the templates escape every string.
"""

from __future__ import annotations

from typing import Any

from ...metrics.ams import ConfigScore
from ...metrics.intervals import MIN_TASKS, TOO_FEW
from ..cells import DASH, fmt_score, fmt_usd
from ..compare import RunComparison
from ..compare import _signed
from ..compare import _yes as _verdict
from ..report import Report
from .model import Names, _bounds

UP, DOWN = "▲", "▼"  # failed in A and passes in B; passed in A and fails in B


def _rank_key(row: ConfigScore) -> tuple[bool, float, int, bool, float]:
    return (row.ams is None, -(row.ams or 0.0), -row.passes, row.usd_total is None, row.usd_total or 0.0)


def leaderboard_rows(report: Report, names: Names, config_index: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
    """Configurations best first (AMS, then passes, then lower total cost); ties share a rank."""
    iv = report.intervals
    ranked = sorted(report.configurations, key=_rank_key)
    rows, rank, last = [], 0, None
    for n, r in enumerate(ranked, 1):
        key = (r.ams, r.passes)
        if key != last:
            rank, last = n, key
        stats = report.trials.by_config.get(r.config) if report.trials is not None else None
        ams_iv = iv.bounds["ams"][r.config] if iv is not None else None
        rows.append({
            "rank": rank, "name": f"{names(r.model)} / {names(r.cli)}", "href": f"config/{config_index[r.config]}.html",
            "ams": fmt_score(r.ams), "ams_sort": "" if r.ams is None else r.ams,
            "interval": DASH if ams_iv is None else _bounds(ams_iv, fmt_score),
            "too_few": bool(ams_iv is not None and ams_iv.too_few),
            "passes": f"{r.passes}/{r.n_tasks}", "passes_sort": r.passes,
            "cost": fmt_usd(r.usd_total), "cost_sort": "" if r.usd_total is None else r.usd_total,
            "trials": r.attempts if stats is None else stats.trials,
            "first": DASH if iv is None else _share(iv.first[r.config]),
        })
    return rows


def _flip(comparison: RunComparison | None) -> dict[tuple[tuple[str, str], str], str]:
    if comparison is None:
        return {}
    return {(c.config, c.task): (UP if c.passed[1] else DOWN) for c in comparison.cells if c.flipped}


def task_heatmap(report: Report, names: Names, comparison: RunComparison | None = None) -> dict[str, Any] | None:
    """Tasks down the side, configurations across (in leaderboard order): each cell's passes over
    its valid trials, shaded by that rate, with ▲/▼ where the compared run flipped."""
    table = report.trials
    if table is None or not table.tasks:
        return None
    flips = _flip(comparison)
    configs = [r.config for r in sorted(report.configurations, key=_rank_key)]
    rows = []
    for task in table.tasks:
        cells = []
        for config in configs:
            stats = table.cells.get((config, task))
            flip = flips.get((config, task), "")
            if stats is None or not stats.trials:
                cells.append({"text": DASH, "level": "none", "flip": flip, "title": "no valid trial"})
                continue
            rate = stats.passes / stats.trials
            level = "all" if rate == 1 else "none-passed" if rate == 0 else f"p{min(3, int(rate * 4))}"
            cells.append({"text": f"{stats.passes}/{stats.trials}", "level": level, "flip": flip,
                          "title": f"{stats.passes} of {stats.trials} trials passed"
                                   + {UP: "; flipped to pass against the compared run",
                                      DOWN: "; flipped to fail against the compared run", "": ""}[flip]})
        rows.append({"task": names.text(task), "cells": cells})
    return {"configs": [f"{names(m)} / {names(c)}" for m, c in configs], "rows": rows,
            "flips": len(flips), "compared": comparison is not None}


def _share(value: float | None) -> str:
    return DASH if value is None else f"{value * 100:.0f}%"


def comparison_view(comparison: RunComparison, names: Names) -> dict[str, Any]:
    """The comparison page: A and B named (paths are hidden in a blind site: they may name a model),
    per configuration the paired difference, per task the cells that flipped or moved."""
    labels = ("A (compared run)", "B (this site's run)") if names.blind else comparison.labels
    configs = []
    for c in comparison.configs:
        d = c.difference
        configs.append({
            "name": f"{names(c.config[0])} / {names(c.config[1])}", "passes": f"{c.passes[0]} → {c.passes[1]}",
            "ams_a": fmt_score(c.ams[0]), "ams_b": fmt_score(c.ams[1]),
            "delta": _signed(c.estimate),
            "interval": TOO_FEW if d.too_few else DASH if d.low is None or d.high is None
            else f"{d.low:+.3f} – {d.high:+.3f}",
            "b_ahead": _share(c.b_ahead), "a_ahead": _share(c.a_ahead),
            "direction": "" if c.estimate is None or d.too_few or d.low is None or d.high is None
            else "up" if d.low > 0 else "down" if d.high < 0 else ""})
    cells = []
    for cell in comparison.cells:
        if not cell.changed:
            continue
        cells.append({"task": names.text(cell.task), "config": f"{names(cell.config[0])} / {names(cell.config[1])}",
                      "a": _verdict(cell.passed[0]), "b": _verdict(cell.passed[1]),
                      "flip": (UP if cell.passed[1] else DOWN) if cell.flipped else "",
                      "reward_a": fmt_score(cell.reward[0]), "reward_b": fmt_score(cell.reward[1]),
                      "delta": _signed(cell.reward_change)})
    return {"a": names.text(labels[0]), "b": names.text(labels[1]), "selection": comparison.selection,
            "tasks": len(comparison.tasks), "only_a": len(comparison.only[0]), "only_b": len(comparison.only[1]),
            "resamples": comparison.resamples, "seed": comparison.seed, "min_tasks": MIN_TASKS,
            "configs": configs, "cells": cells, "flips": sum(c.flipped for c in comparison.cells),
            "n_cells": len(comparison.cells)}

