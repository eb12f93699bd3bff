"""Render a :class:`Report` as Markdown, CSV or JSON (the formats registered first in
:mod:`.formats`).

Markdown follows seed 000's Table 2 (model shown once per group, best value per column in
bold, arrows for the direction of each metric), then the budgets it used, the rubric,
rank validation and notes. CSV carries the same rows as plain numbers (one section per
table, separated by a blank line); JSON is :meth:`Report.to_dict`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable

import orjson

from ..metrics.ams import ConfigScore
from ..metrics.rubric import RUBRIC
from ..vocab import TIERS
from . import every_trial
from .cells import DASH, _md, _table, fmt_median, fmt_score, fmt_tokens, fmt_usd
from .formats import FORMATS, ReportFormat
from .render_intervals import _interval_lines, interval_csv_rows
from .report import Report, config_name

__all__ = ["DASH", "MAIN_COLUMNS", "delta_best_cells", "fmt_median", "fmt_score", "fmt_tokens", "fmt_usd",
           "render", "render_csv", "render_json", "render_markdown"]

# (header, value, formatter, higher is better) for the columns that get a best mark
MAIN_COLUMNS: list[tuple[str, Callable[[ConfigScore], float | None], Callable, bool]] = [
    ("Tok/P ↓", lambda r: r.tokens_per_pass, fmt_tokens, False),
    ("USD/P ↓", lambda r: r.usd_per_pass, fmt_usd, False),
    ("S_E ↑", lambda r: r.tier_scores["easy"], fmt_score, True),
    ("S_M ↑", lambda r: r.tier_scores["medium"], fmt_score, True),
    ("S_H ↑", lambda r: r.tier_scores["hard"], fmt_score, True),
    ("AMS ↑", lambda r: r.ams, fmt_score, True),
    ("Δbest ↓", lambda r: r.delta_best, fmt_score, False),
]


def _marked(rows: list[ConfigScore], get: Callable, fmt: Callable, higher: bool) -> list[str]:
    """Formatted cells with every cell that shows the best value in bold."""
    values = [get(r) for r in rows]
    present = [v for v in values if v is not None]
    best = fmt((max if higher else min)(present)) if present else None
    return [f"**{fmt(v)}**" if v is not None and fmt(v) == best else fmt(v) for v in values]


def delta_best_cells(rows: list[ConfigScore]) -> list[str]:
    """Δbest: ``best`` for each model's best CLI (its gap is 0 by definition, so bolding it says nothing);
    among the others the smallest gap in bold."""
    gaps = [r.delta_best for r in rows]
    others = [g for g in gaps if g is not None and fmt_score(g) != fmt_score(0.0)]
    least = fmt_score(min(others)) if others else None
    cells = []
    for g in gaps:
        if g is None:
            cells.append(DASH)
        elif fmt_score(g) == fmt_score(0.0):
            cells.append("best")
        else:
            cells.append(f"**{fmt_score(g)}**" if fmt_score(g) == least else fmt_score(g))
    return cells


def main_table(report: Report) -> list[str]:
    rows = report.configurations
    passes = _marked(rows, lambda r: r.passes, str, True)
    columns = [_marked(rows, get, fmt, higher) for _h, get, fmt, higher in MAIN_COLUMNS[:-1]]
    columns.append(delta_best_cells(rows))
    body, last_model = [], None
    for i, row in enumerate(rows):
        model = _md(row.model) if row.model != last_model else ""
        last_model = row.model
        pass_cell = f"{passes[i]}/{row.n_tasks}"
        profile = "/".join(str(row.passes_by_tier[t]) for t in TIERS)
        body.append([model, _md(row.cli), pass_cell, profile, *(col[i] for col in columns)])
    header = ["Model", "CLI", "Pass ↑", "P(E/M/H)", *(h for h, *_ in MAIN_COLUMNS)]
    return _table(header, body, "llrl" + "r" * len(MAIN_COLUMNS))


def _budget_lines(report: Report) -> list[str]:
    rows = [[t.capitalize(), str(report.tier_sizes[t]), ", ".join(f"{b:g}" for b in report.budgets[t].grid),
             f"{report.budgets[t].tau:g}"] for t in TIERS]
    return [f"Budgets (USD) from {report.budgets_source}:", "",
            *_table(["Tier", "Tasks", "Budget grid B_g", "tau_g"], rows, "lrll")]


def _rubric_lines(report: Report) -> list[str]:
    rubric = report.rubric
    assert rubric is not None
    lines = ["## Rubric (0-3, median of each cell's scored trials)", "",
             "Scale: " + "; ".join(f"{k} = {v}" for k, v in RUBRIC.items()) + ". A configuration wins a task when "
             "its median equals or beats every other; ties are wins for all tied.", ""]
    if not rubric.medians:
        lines += ["No scored trials yet (`agentmeter score TRIAL_ID SCORE` or the review screen).", ""]
    else:
        rows = []
        for config in rubric.configs:
            standing = rubric.standings.get(config)
            if standing is None:
                continue
            rate = f"{standing.winrate:.2f}" if standing.winrate is not None else DASH
            rows.append([_md(config[0]), _md(config[1]), str(standing.wins), str(standing.losses),
                         str(standing.unscored), rate])
        tasks = max(s.tasks for s in rubric.standings.values())
        lines += [f"Winrate = wins / {tasks} task(s) scored; an unscored cell is neither a win nor a loss.", ""]
        lines += _table(["Model", "CLI", "Wins", "Losses", "Unscored", "Winrate ↑"], rows, "llrrrr") + [""]
        scored_configs = [c for c in rubric.configs if c in rubric.standings]
        cells = []
        for task in rubric.tasks:
            winners = rubric.winners.get(task)
            if not winners:
                continue
            row = [_md(task)]
            for config in scored_configs:
                value = rubric.medians.get((config, task))
                text = DASH if value is None else fmt_median(value)
                row.append(f"**{text}**" if config in winners else text)
            row.append("tie" if len(winners) > 1 else _md(config_name(winners[0])))
            cells.append(row)
        header = ["Task", *(_md(config_name(c)) for c in scored_configs), "Top"]
        lines += _table(header, cells, "l" + "r" * len(scored_configs) + "l") + [""]
    lines.append(f"{rubric.trials_scored} scored trial(s)."
                 + (f" {rubric.ignored_scores} score(s) on infra-invalid trials left out." if rubric.ignored_scores
                    else ""))
    if rubric.gate is not None:
        lines += ["", ("Honesty gate: passed. " if rubric.gate.passed else "Honesty gate: FAILED. ")
                  + rubric.gate.message]
    return lines + [""]


def _agreement_rows(agreement) -> list[list[str]]:
    rows = [["all", f"{p.a} × {p.b}", str(p.n), _fmt_or_dash(p.kappa_quadratic), _fmt_or_dash(p.exact)]
            for p in agreement.pairs]
    for task, part in agreement.tasks.items():
        rows += [[task, f"{p.a} × {p.b}", str(p.n), _fmt_or_dash(p.kappa_quadratic), _fmt_or_dash(p.exact)]
                 for p in part.pairs if p.n]
    return rows


def _fmt_or_dash(value: float | None) -> str:
    return DASH if value is None else f"{value:.3f}"


def _agreement_lines(report: Report) -> list[str]:
    agreement = report.agreement
    assert agreement is not None
    lines = ["## Reviewer agreement (0-3 rubric)", "",
             f"{len(agreement.reviewers)} reviewer(s); {agreement.n_trials} trial(s) scored by two or more. "
             f"Krippendorff's alpha (ordinal) {_fmt_or_dash(agreement.alpha_ordinal)}. Kappa: Cohen's, quadratic "
             "weights; exact: share of trials both scored the same; n: trials both scored.", ""]
    if not agreement.pairs:
        return lines + ["Fewer than two reviewers: no agreement to measure yet.", ""]
    lines += _table(["Scope", "Reviewers", "n", "Kappa (quadratic)", "Exact"],
                    [[_md(c) for c in row] for row in _agreement_rows(agreement)], "llrrr")
    per_task = [[_md(t), str(a.n_trials), _fmt_or_dash(a.alpha_ordinal)] for t, a in agreement.tasks.items()]
    if per_task:
        lines += ["", *_table(["Task", "Trials", "Alpha (ordinal)"], per_task, "lrr")]
    return lines + [""]


def _validation_lines(report: Report) -> list[str]:
    v = report.validation
    assert v is not None

    def num(x: float | None, digits: int = 3) -> str:
        return DASH if x is None else f"{x:.{digits}f}"

    lines = [f"## Rank validation: full set vs {report.validation_source}", "",
             f"{v.n} configurations with an AMS in both. Spearman {num(v.spearman)}, Kendall tau-b {num(v.kendall)}, "
             f"AMS MAE {num(v.mae, 4)}; Top-1 {'preserved' if v.top1_preserved else 'NOT preserved'}, "
             f"Top-3 set {'preserved' if v.top3_preserved else 'NOT preserved'}.", ""]
    rows = [[_md(config_name(r.config)), str(r.subset_rank), f"{r.subset_ams:.3f}", str(r.full_rank),
             f"{r.full_ams:.3f}", f"{r.delta:+.3f}"] for r in v.rows]
    lines += _table(["Config", "Subset rank", "Subset AMS", "Full rank", "Full AMS", "ΔAMS"], rows, "lrrrrr")
    return lines + [""]


def render_markdown(report: Report) -> str:
    sizes = report.tier_sizes
    tiers = " / ".join(f"{sizes[t]} {t}" for t in TIERS) + (f" / {sizes['none']} untiered" if sizes["none"] else "")
    lines = [f"# AgentMeter report: {_md(report.suite)}", "",
             f"- Seed-prompt hash: `{report.seed_prompt_hash or 'unknown'}`",
             f"- Trial selection: `{report.selection}`, the {report.selection_text}",
             f"- Tasks: {report.n_tasks} ({tiers}); alpha = {report.alpha:g}",
             f"- Computed by agentmeter-tui {report.tool_version}", ""]
    lines += [f"Selection: `{report.selection}` ({report.selection_text}).", ""]
    lines += main_table(report)
    lines += ["", "Bold marks the best value per column. Tok/P and USD/P sum every attempted run "
              "(infra-invalid retries included) over the passes among them. Δbest is the AMS gap to the same "
              "model's best CLI: that CLI's own Δbest is 0 by definition and shown as `best`; bold marks the "
              "smallest gap among the others.", ""]
    lines += _budget_lines(report) + [""]
    if report.trials is not None:
        lines += every_trial.markdown_lines(report.trials, fmt_usd, fmt_tokens, _md, _table)
    if report.rubric is not None:
        lines += _rubric_lines(report)
    if report.agreement is not None:
        lines += _agreement_lines(report)
    if report.validation is not None:
        lines += _validation_lines(report)
    if report.funnel:
        lines += _funnel_lines(report)
    if report.intervals is not None:
        lines += _interval_lines(report, report.intervals)
    if report.notes:
        lines += ["## Notes", "", *(f"- {n}" for n in report.notes), ""]
    return "\n".join(lines)


FUNNEL_COLUMNS = (("build", "Build"), ("exec", "Exec"), ("side_effects", "SideFx"), ("exact", "Exact"),
                  ("fuzzy", "Fuzzy"), ("semantic", "Semantic"))


def _funnel_lines(report: Report) -> list[str]:
    """Seed 001's funnel per configuration: mean pass rate (%) at each stage, macro over classes."""
    rows = []
    for row in report.funnel or []:
        cells = [_md(row["model"]), _md(row["cli"]), str(row["trials"])]
        cells += ["-" if row.get(key) is None else f"{row[key] * 100:.1f}" for key, _ in FUNNEL_COLUMNS]
        cells.append("-" if row.get("runtime_ratio") is None else f"{row['runtime_ratio']:.2f}")
        rows.append(cells)
    header = ["Model", "CLI", "Trials", *(label for _, label in FUNNEL_COLUMNS), "Runtime ×"]
    return ["## Differential funnel", "", *_table(header, rows, "lll" + "r" * 7), "",
            "Per-class pass rates in %, macro-averaged over command classes, mean over trials; killed or "
            "errored trials count 0. Runtime × is candidate / oracle.", ""]


def _num(value: float | None, digits: int = 6) -> str:
    # str(round(.)) keeps plain decimals (1123490.3, 0.674094) where %g would switch to exponents.
    return "" if value is None else str(round(value, digits))


def render_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    rubric = report.rubric is not None
    writer.writerow(["Model", "CLI", "Pass", "N", "P_E", "P_M", "P_H", "Tok/P", "USD/P", "S_E", "S_M", "S_H", "AMS",
                     "delta_best", *(["Winrate"] if rubric else []), "Selection", "Tool version"])
    for r in report.configurations:
        scores = r.tier_scores
        writer.writerow([r.model, r.cli, r.passes, r.n_tasks, *(r.passes_by_tier[t] for t in TIERS),
                         _num(r.tokens_per_pass, 1), _num(r.usd_per_pass), *(_num(scores[t]) for t in TIERS),
                         _num(r.ams), _num(r.delta_best), *([_num(r.rubric_winrate)] if rubric else []),
                         report.selection, report.tool_version])
    if report.trials is not None:
        writer.writerows(every_trial.csv_rows(report.trials, _num))
    if report.rubric is not None and report.rubric.medians:
        table = report.rubric
        configs = [c for c in table.configs if c in table.standings]
        writer.writerow([])
        writer.writerow(["Task", *(config_name(c) for c in configs), "Winners"])
        for task in table.tasks:
            if task in table.winners:
                writer.writerow([task, *(_num(table.medians.get((c, task))) for c in configs),
                                 " ".join(config_name(c) for c in table.winners[task])])
    if report.agreement is not None:
        agreement = report.agreement
        writer.writerow([])
        writer.writerow(["Scope", "Reviewer A", "Reviewer B", "n", "Kappa quadratic", "Exact"])
        scopes = [("all", agreement), *agreement.tasks.items()]
        for scope, part in scopes:
            for p in part.pairs:
                writer.writerow([scope, p.a, p.b, p.n, _num(p.kappa_quadratic), _num(p.exact)])
        writer.writerow([])
        writer.writerow(["Scope", "Trials", "Alpha ordinal"])
        for scope, part in scopes:
            writer.writerow([scope, part.n_trials, _num(part.alpha_ordinal)])
    if report.validation is not None:
        v = report.validation
        writer.writerow([])
        writer.writerow(["Model", "CLI", "Subset rank", "Subset AMS", "Full rank", "Full AMS", "Delta AMS"])
        for row in v.rows:
            writer.writerow([*row.config, row.subset_rank, _num(row.subset_ams), row.full_rank, _num(row.full_ams),
                             _num(row.delta)])
        writer.writerow([])
        writer.writerow(["Spearman", "Kendall tau-b", "AMS MAE", "Top-1 preserved", "Top-3 preserved"])
        writer.writerow([_num(v.spearman), _num(v.kendall), _num(v.mae), v.top1_preserved, v.top3_preserved])
    if report.intervals is not None:
        writer.writerows(interval_csv_rows(report.intervals, _num))
    if report.funnel:
        writer.writerow([])
        writer.writerow(["Model", "CLI", "Trials", *(label for _, label in FUNNEL_COLUMNS), "Runtime ratio"])
        for stages in report.funnel:
            writer.writerow([stages["model"], stages["cli"], stages["trials"],
                             *(_num(stages.get(k)) for k, _ in FUNNEL_COLUMNS), _num(stages.get("runtime_ratio"))])
    return out.getvalue()


def render_json(report: Report, detail: bool = False) -> str:
    return orjson.dumps(report.to_dict(detail), option=orjson.OPT_INDENT_2).decode() + "\n"


class MarkdownFormat(ReportFormat):
    name = "md"

    def render(self, report: Report, *, detail: bool = False) -> str:
        return render_markdown(report)


class CsvFormat(ReportFormat):
    name = "csv"

    def render(self, report: Report, *, detail: bool = False) -> str:
        return render_csv(report)


class JsonFormat(ReportFormat):
    name = "json"

    def render(self, report: Report, *, detail: bool = False) -> str:
        return render_json(report, detail)


def render(report: Report, fmt: str, detail: bool = False) -> str:
    """``report`` in the registered format ``fmt`` (:data:`.formats.FORMATS`)."""
    made = FORMATS.get(fmt)()
    if not isinstance(made, ReportFormat):  # a FolderFormat writes files (its ``write``), no one text
        raise ValueError(f"report format '{fmt}' writes a folder, not a text")
    return made.render(report, detail=detail)
