"""The intervals section of a report in Markdown and CSV: every-trial estimates with their two-level
bootstrap intervals (``metrics.intervals``), rank shares, and each configuration against the best."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..metrics.intervals import METHOD, MIN_TASKS, TOO_FEW, Interval, Intervals
from ..metrics.attempts import Config
from .cells import DASH, _md, _table, fmt_score, fmt_usd
from .report import Report, config_name


def _bounds(interval: Interval, fmt: Callable[[float | None], str]) -> str:
    if interval.too_few:
        return TOO_FEW
    if interval.low is None and interval.high is None:
        return DASH
    return f"[{fmt(interval.low)}, {'∞' if interval.high is None else fmt(interval.high)}]"


def _estimate(iv: Intervals, name: str, config: Config, fmt: Callable[[float | None], str]) -> str:
    interval = iv.bounds[name][config]
    if interval.too_few:
        return TOO_FEW
    return f"{fmt(iv.estimates[name][config])} {_bounds(interval, fmt)}"


def _share(value: float | None) -> str:
    return DASH if value is None else f"{value * 100:.1f}"


def _interval_lines(report: Report, iv: Intervals) -> list[str]:
    """Per configuration the every-trial estimate with its 95 % interval (``iv``, the report's), how
    often it ranks first and in the top three, and its AMS against the best configuration's on the
    same resampled tasks."""
    rows = []
    ranked = sorted(report.configurations, key=lambda r: -(r.ams if r.ams is not None else -1))
    best = ranked[0].config if ranked else None
    for r in report.configurations:
        c = r.config
        versus = DASH
        if best is not None and c != best:
            cmp = iv.compare(c, best)
            versus = (TOO_FEW if cmp.difference.too_few or cmp.a_ahead is None
                      else f"{_bounds(cmp.difference, fmt_score)} ({cmp.a_ahead * 100:.0f} % ahead)")
        rows.append([_md(r.model), _md(r.cli), _estimate(iv, "passes", c, lambda v: f"{v:.3g}"),
                     _estimate(iv, "usd_per_pass", c, fmt_usd), _estimate(iv, "ams", c, fmt_score),
                     _share(iv.first[c]), _share(iv.top3[c]), versus])
    best_name = config_name(best) if best else DASH
    return ["## Intervals", "",
            f"Selection: every valid trial of each cell. {iv.level * 100:g} % intervals from a {METHOD}, "
            f"{iv.resamples} resamples, seed {iv.seed}; each figure is the every-trial estimate (the cell's "
            "trials averaged; with one trial per cell Table 2's own) with its interval. Below "
            f"{MIN_TASKS} tasks (or with a tier of one task, for AMS) there is no interval: {TOO_FEW}. "
            "P(1st) and P(top 3): share of resamples in which the configuration's AMS is the highest (ties "
            f"count for each) and at most two are higher. vs best: the AMS difference to {_md(best_name)} on the "
            "same resampled tasks.", "",
            *_table(["Model", "CLI", "Pass", "USD/P", "AMS", "P(1st) %", "P(top 3) %", "AMS vs best"], rows,
                    "llrrrrrr"), ""]


def interval_csv_rows(iv: Intervals, num: Callable[[float | None], str]) -> list[list[Any]]:
    """The intervals as a CSV section after a blank row: estimate, bounds and too-few mark per statistic."""
    names = ("passes", "usd_per_pass", "ams")
    rows: list[list[Any]] = [[], ["Model", "CLI", *(f"{s}_{end}" for s in ("Pass", "USD/P", "AMS")
                                               for end in ("estimate", "low", "high", "too_few_tasks")),
                             "P_first", "P_top3", "Selection"]]
    for c in iv.configs:
        cells = []
        for name in names:
            b = iv.bounds[name][c]
            cells += [num(iv.estimates[name][c]), num(b.low), num(b.high), "yes" if b.too_few else ""]
        rows.append([*c, *cells, num(iv.first[c]), num(iv.top3[c]), "every-trial"])
    return rows
