"""The every-trial tables of a report: per configuration and per (task, configuration) cell, the
figures of all valid trials (``metrics.trials``), beside Table 2's one selected run per cell.

Markdown, CSV and JSON show the same numbers; each table says that it counts every trial (it does
not depend on ``--select``), as Table 2 says which selection it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..metrics.attempts import Config, Attempt
from ..metrics.trials import Spread, TrialStats, cell_stats, config_stats

SELECTION = "every valid trial of each cell (all trials and retries; those our side failed, infra-invalid, left out)"
DASH = "—"


@dataclass
class TrialTable:
    configs: list[Config]
    tasks: list[str]
    by_config: dict[Config, TrialStats]
    cells: dict[tuple[Config, str], TrialStats]

    def to_dict(self) -> dict[str, Any]:
        return {
            "selection": "every-trial", "selection_text": SELECTION,
            "configurations": [{"model": c[0], "cli": c[1], **self.by_config[c].to_dict()} for c in self.configs],
            "tasks": [{"task": t, "model": c[0], "cli": c[1], **self.cells[(c, t)].to_dict()}
                      for t in self.tasks for c in self.configs if (c, t) in self.cells],
        }


def trial_table(configs: Sequence[Config], attempts: Mapping[Config, Sequence[Attempt]], tasks: Sequence[str]) -> TrialTable:
    cells: dict[tuple[Config, str], TrialStats] = {}
    for config in configs:
        per_task: dict[str, list[Attempt]] = {}
        for run in attempts.get(config, ()):
            per_task.setdefault(run.task, []).append(run)
        for task in tasks:
            if task in per_task:
                cells[(config, task)] = cell_stats(per_task[task])
    by_config = {c: config_stats({t: cells[(c, t)] for t in tasks if (c, t) in cells}, list(tasks),
                                 list(attempts.get(c, ()))) for c in configs}
    return TrialTable(list(configs), list(tasks), by_config, cells)


def _f(value: float | None, digits: int = 3) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def _spread(spread: Spread, fmt: Callable[[float | None], str]) -> str:
    if spread.mean is None:
        return DASH
    return f"{fmt(spread.mean)} [{fmt(spread.low)}–{fmt(spread.high)}]"


def _reward(stats: TrialStats) -> str:
    if stats.mean_reward is None:
        return DASH
    return _f(stats.mean_reward) + ("" if stats.stderr is None else f" ± {_f(stats.stderr)}")


def _at_k(stats: TrialStats) -> tuple[str, str, str, str]:
    if not stats.pass_at:
        return DASH, DASH, DASH, DASH
    return _f(stats.pass_at[0]), str(len(stats.pass_at)), _f(stats.pass_at[-1]), _f(stats.pass_hat[-1])


CONFIG_HEADER = ("Model", "CLI", "Trials", "Passes", "Mean reward ± SE", "pass@1", "k", "pass@k", "pass^k",
                 "USD/trial [min–max]", "Tokens/trial [min–max]")


def trial_cells(table: TrialTable, fmt_usd: Callable, fmt_tokens: Callable,
                md: Callable[[str], str] = str) -> tuple[tuple[str, ...], list[list[str]]]:
    """The per-configuration table as text cells (Markdown and the report screen show the same)."""
    rows = []
    for c in table.configs:
        s = table.by_config[c]
        rows.append([md(c[0]), md(c[1]), str(s.trials), str(s.passes), _reward(s), *_at_k(s),
                     _spread(s.cost, fmt_usd), _spread(s.tokens, fmt_tokens)])
    return CONFIG_HEADER, rows


def markdown_lines(table: TrialTable, fmt_usd: Callable, fmt_tokens: Callable, md: Callable[[str], str],
                   render_table: Callable) -> list[str]:
    header, rows = trial_cells(table, fmt_usd, fmt_tokens, md)
    lines = ["## Every trial", "", f"Selection: {SELECTION}; not the `--select` rule of the table above. "
             "pass@k (Chen et al. 2021, unbiased) and pass^k (tau-bench) at the largest k every task with a trial "
             "has, averaged over the tasks (a task without a trial counts 0); SE: the standard error of the mean "
             "reward over trials, tasks held fixed. JSON gives every k.", "",
             *render_table(header, rows, "llrrrrrrrrr"), ""]
    cells = []
    for t in table.tasks:
        for c in table.configs:
            s = table.cells.get((c, t))
            if s is None:
                continue
            rate = DASH if s.wilson is None else f"{s.passes / s.trials:.2f} [{s.wilson[0]:.2f}, {s.wilson[1]:.2f}]"
            cells.append([md(t), md(f"{c[0]}/{c[1]}"), str(s.trials), str(s.passes), rate, _reward(s),
                          *_at_k(s)[1:], _spread(s.cost, fmt_usd)])
    task_header = ["Task", "Configuration", "Trials", "Passes", "Pass rate [Wilson 95 %]", "Mean reward ± SE", "k",
                   "pass@k", "pass^k", "USD/trial [min–max]"]
    lines += ["### Every trial, per task", "", f"Selection: {SELECTION}.", "",
              *render_table(task_header, cells, "llrrrrrrrr"), ""]
    return lines


def _csv_stats(s: TrialStats, k_max: int, num: Callable) -> list:
    ks = [num(s.pass_at[k]) if k < len(s.pass_at) else "" for k in range(k_max)]
    hats = [num(s.pass_hat[k]) if k < len(s.pass_hat) else "" for k in range(k_max)]
    spreads = [num(v) for sp in (s.cost, s.tokens) for v in (sp.mean, sp.low, sp.high)]
    return [s.trials, s.passes, num(s.mean_reward), num(s.stderr), *ks, *hats, *spreads]


def csv_rows(table: TrialTable, num: Callable) -> list[list]:
    """Two sections (configurations, then cells), each after a blank row and with a selection column."""
    k_max = max((len(s.pass_at) for s in table.cells.values()), default=0)
    stats = ["Trials", "Passes", "Mean_reward", "SE", *(f"pass@{k}" for k in range(1, k_max + 1)),
             *(f"pass^{k}" for k in range(1, k_max + 1)),
             *(f"{what}_{end}" for what in ("USD_trial", "Tok_trial") for end in ("mean", "min", "max"))]
    rows: list[list] = [[], ["Model", "CLI", *stats, "Selection"]]
    rows += [[*c, *_csv_stats(table.by_config[c], k_max, num), "every-trial"] for c in table.configs]
    rows += [[], ["Task", "Model", "CLI", *stats, "Wilson_low", "Wilson_high", "Selection"]]
    for t in table.tasks:
        for c in table.configs:
            s = table.cells.get((c, t))
            if s is not None:
                low, high = s.wilson if s.wilson is not None else (None, None)
                rows.append([t, *c, *_csv_stats(s, k_max, num), num(low), num(high), "every-trial"])
    return rows
