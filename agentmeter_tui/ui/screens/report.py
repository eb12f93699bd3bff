"""Provides :class:`ReportScreen`: the Table-2 report, the rubric with winrates, and charts.

Built by ``core.reporting.report_from_store`` on the store thread (the same report that
``agentmeter report`` prints), when the screen is shown, when ``ctrl+r`` asks, and after
trials finish while it is visible. ``s`` switches the trial-selection rule (latest / median); ``v``
opens the comparison with another run (``screens.runs``) when the TUI was opened with one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import DataTable, Static

from ...core.reporting.charts import heatmap_data, scatter_data, tier_profile_data
from ...core.reporting.every_trial import SELECTION as EVERY_TRIAL
from ...core.reporting.every_trial import trial_cells
from ...core.reporting.render import (
    MAIN_COLUMNS,
    delta_best_cells,
    fmt_median,
    fmt_score,
    fmt_tokens,
    fmt_usd,
)
from ...core.vocab import TIERS
from ..data import report
from ..host import host
from ..widgets.charts import AmsHeatmap, PassCostPlot, TierProfile
from ..widgets.footer import KeysFooter
from ..widgets.money import HoldBanner
from .base import SessionScreen

if TYPE_CHECKING:
    from textual.worker import WorkType

    from ...core.metrics.attempts import Selection
    from ...core.reporting.report import Report

# (header, value of a ConfigScore, formatter, higher is better): the columns `agentmeter report`
# prints, so the screen and the Markdown table never disagree, plus the rubric winrate.
TABLE2 = (*MAIN_COLUMNS, ("WR ↑", lambda r: r.rubric_winrate, fmt_score, True))


def best_cells(values: list[float | None], fmt: Callable, higher: bool) -> list[Text]:
    """Cells with the best value of the column in bold (every tie too)."""
    present = [v for v in values if v is not None]
    best = (max if higher else min)(present) if present else None
    return [Text(fmt(v), style="bold" if v is not None and v == best else "", justify="right") for v in values]


def agreement_markup(agreement) -> str:
    """Reviewer agreement in a few lines: alpha over all, then kappa and exact share per pair."""
    if agreement is None or not agreement.pairs:
        return "[$text-muted]Agreement: one reviewer so far (`agentmeter review --reviews 2` asks for two).[/]"

    def num(value: float | None, percent: bool = False) -> str:
        if value is None:
            return "—"
        return f"{value * 100:.0f}%" if percent else f"{value:.2f}"

    lines = [f"[b]Agreement[/] · Krippendorff's α (ordinal) [b]{num(agreement.alpha_ordinal)}[/] over "
             f"{agreement.n_trials} trials scored by two or more"]
    for pair in agreement.pairs[:4]:
        lines.append(f"  {escape(pair.a)} × {escape(pair.b)} · n {pair.n} · weighted κ [b]{num(pair.kappa_quadratic)}[/]"
                     f" · exact {num(pair.exact, True)}")
    if len(agreement.pairs) > 4:
        lines.append(f"  [$text-muted]… {len(agreement.pairs) - 4} more pairs in `agentmeter report --agreement`[/]")
    return "\n".join(lines)


class ReportScreen(SessionScreen):
    REFRESH_SECONDS = 5.0
    BINDINGS = [Binding("s", "selection", "Latest/median", id="selection",
                        tooltip="Switch the trial-selection rule: latest completed trial or median trial"),
                Binding("i", "intervals", "Intervals", id="intervals",
                        tooltip="Show or hide 95% bootstrap intervals over tasks and how often each is first"),
                Binding("ctrl+r", "reload", "Reload", id="reload", tooltip="Build the report again from the store"),
                Binding("c", "charts", "Charts", id="charts",
                        tooltip="On a narrow terminal: the charts in place of the tables, and back"),
                Binding("v", "versus", "Versus", id="versus",
                        tooltip="This run compared with another store's (report --compare A B --tui names it)")]
    RESAMPLES = 2000
    # Below this width the tables and the charts do not fit side by side: the tables keep the
    # screen (their figures are the report) and ``c`` swaps the charts in, rather than both
    # cut to a strip where Table 2 shows names without figures (seen at 80x24).
    SIDE_BY_SIDE = 120

    def __init__(self) -> None:
        super().__init__(id="report-screen")
        self.selection: Selection = "latest"
        self.intervals = False
        self.report: Report | None = None
        self._version = -1
        self.charts_first = False

    def compose(self) -> ComposeResult:
        yield Static("Report", id="report-title", classes="screen-title")
        yield HoldBanner()
        with Horizontal(id="report-body"):
            with Vertical(id="report-tables"):
                yield Static("Table 2 · pass, cost and AgentMeter Score per configuration", classes="section-title")
                yield DataTable(id="table2", cursor_type="none", zebra_stripes=True)
                yield Static("Every trial · " + EVERY_TRIAL, id="trials-title", classes="section-title")
                yield DataTable(id="trials", cursor_type="none", zebra_stripes=True)
                yield Static("Rubric · median 0-3 per cell, bold = task winner", id="rubric-title",
                             classes="section-title")
                yield DataTable(id="rubric", cursor_type="none", zebra_stripes=True)
                yield Static("", id="agreement")
                yield Static("", id="report-notes")
            with Vertical(id="report-charts"):
                yield Static("AMS heatmap · ★ best CLI per model", classes="section-title")
                yield AmsHeatmap(id="heatmap")
                yield PassCostPlot(id="scatter")
                yield Static("Passes by tier · top configurations by AMS", classes="section-title")
                yield TierProfile(id="tiers")
        yield KeysFooter()

    def on_screen_resume(self) -> None:
        self.action_reload()

    def on_resize(self) -> None:
        self._fit_width()

    def action_versus(self) -> None:
        host(self.app).open_runs()

    def action_charts(self) -> None:
        self.charts_first = not self.charts_first
        self._fit_width()

    def _fit_width(self) -> None:
        narrow = (self.size.width or 160) < self.SIDE_BY_SIDE
        self.set_class(narrow, "-narrow")
        self.query_one("#report-tables").display = not (narrow and self.charts_first)
        self.query_one("#report-charts").display = not narrow or self.charts_first

    def flush(self) -> None:
        if self.session.grid.finished_version != self._version:
            self.action_reload()

    def action_selection(self) -> None:
        self.selection = "median" if self.selection == "latest" else "latest"
        self.action_reload()

    def action_intervals(self) -> None:
        self.intervals = not self.intervals
        self.action_reload()

    def action_reload(self) -> None:
        self._version = self.session.grid.finished_version
        # the coroutine function, not a coroutine: a load cancelled before it starts leaves none unawaited
        work: WorkType[None] = self._load  # (Textual's WorkType solves to Never for a bare method)
        self.run_worker(work, group="report", exclusive=True, exit_on_error=False)

    async def _load(self) -> None:
        if self.session.suite_id is None:
            self.query_one("#report-title", Static).update("Report · no suite in this store yet")
            return
        try:
            built = await self.session.store.call(report, self.session.suite_id, self.selection,
                                                  self.RESAMPLES if self.intervals else 0)
        except Exception as exc:  # a report that cannot be built says why instead of crashing the app
            self.query_one("#report-title", Static).update(f"Report unavailable: {escape(str(exc))}")
            return
        self.report = built
        self._show(built)

    def _show(self, rep: Report) -> None:
        self.query_one("#report-title", Static).update(
            f"[b]Report[/] {escape(rep.suite)} [$text-muted]│[/] {rep.n_tasks} tasks · {len(rep.configurations)} "
            f"configurations [$text-muted]│ selection:[/] {escape(rep.selection_text)}")
        self._table2(rep)
        self._trials(rep)
        self._rubric(rep)
        self.query_one("#agreement", Static).update(agreement_markup(rep.agreement))
        notes = [f"budgets from {rep.budgets_source}", *rep.notes]
        if rep.rubric is not None and rep.rubric.gate is not None:
            notes.append(("Honesty gate passed: " if rep.rubric.gate.passed else "Honesty gate FAILED: ")
                         + rep.rubric.gate.message)
        self.query_one("#report-notes", Static).update("\n".join(f"· {escape(n)}" for n in notes))
        self.query_one(AmsHeatmap).show(heatmap_data(rep))
        self.query_one(PassCostPlot).show(scatter_data(rep))
        self.query_one(TierProfile).show(tier_profile_data(rep, top=8))

    def _table2(self, rep: Report) -> None:
        table = self.query_one("#table2", DataTable)
        table.clear(columns=True)
        rows = rep.configurations
        iv = rep.intervals
        extra = ("Pass 95% CI", "AMS 95% CI", "P(1st)") if iv is not None else ()
        table.add_columns("Model", "CLI", "Pass", "P(E/M/H)", *(h for h, *_ in TABLE2), *extra)
        columns = [best_cells([get(r) for r in rows], fmt, higher) for _, get, fmt, higher in TABLE2]
        delta = TABLE2.index(MAIN_COLUMNS[-1])  # Δbest: `best` for each model's best CLI, not a column of bold 0s
        columns[delta] = [Text(c.strip("*"), style="bold" if c.startswith("**") else "", justify="right")
                          for c in delta_best_cells(rows)]
        if iv is not None:
            def span(name: str, fmt: Callable) -> list[Text]:
                out = []
                for r in rows:
                    b = iv.bounds[name][r.config]
                    text = ("too few tasks" if b.too_few else "—" if b.low is None
                            else f"{fmt(b.low)}–{'∞' if b.high is None else fmt(b.high)}")
                    out.append(Text(text, justify="right", style="dim" if b.too_few else ""))
                return out
            shares = [iv.first[r.config] for r in rows]
            columns += [span("passes", lambda v: f"{v:.3g}"), span("ams", fmt_score),
                        [Text("—" if v is None else f"{v * 100:.0f}%", justify="right") for v in shares]]
        passes = best_cells([r.passes for r in rows], str, True)
        last_model = None
        for i, row in enumerate(rows):
            model = row.model if row.model != last_model else ""
            last_model = row.model
            table.add_row(Text(model, style="bold"), row.cli, Text(f"{passes[i].plain}/{row.n_tasks}",
                                                                   style=passes[i].style, justify="right"),
                          "/".join(str(row.passes_by_tier[t]) for t in TIERS), *(col[i] for col in columns))

    def _trials(self, rep: Report) -> None:
        table = self.query_one("#trials", DataTable)
        table.clear(columns=True)
        if rep.trials is None:  # a report built without its every-trial table: nothing to list
            return
        header, rows = trial_cells(rep.trials, fmt_usd, fmt_tokens)
        table.add_columns(*header)
        for row in rows:
            table.add_row(*(Text(c, justify="right") if n > 1 else c for n, c in enumerate(row)))

    def _rubric(self, rep: Report) -> None:
        """Medians per (task, configuration) with winners in bold and each configuration's winrate.

        Laid out with the longer list down the side: tasks as rows for a big task set, the
        configurations as rows for a big grid, so the table fits across the screen either way.
        """
        table = self.query_one("#rubric", DataTable)
        table.clear(columns=True)
        rubric = rep.rubric
        if rubric is None or not rubric.medians:
            table.add_column("No scored trials yet: score them on the review screen (r, then 0-3).")
            return
        configs = [c for c in rubric.configs if c in rubric.standings]
        tasks = [t for t in rubric.tasks if rubric.winners.get(t)]

        def cell(config, task) -> Text:
            value = rubric.medians.get((config, task))
            return Text("—" if value is None else fmt_median(value), justify="right",
                        style="bold" if config in rubric.winners[task] else "dim" if value is None else "")

        rates = best_cells([rubric.standings[c].winrate for c in configs], fmt_score, True)
        records = [Text(f"{rubric.standings[c].wins}/{rubric.standings[c].losses}", justify="right", style="dim")
                   for c in configs]
        if len(configs) > len(tasks):
            table.add_columns("Configuration", *(t[:14] for t in tasks), "winrate", "W/L")
            for n, config in enumerate(configs):
                table.add_row(f"{config[0]}/{config[1]}", *(cell(config, t) for t in tasks), rates[n], records[n])
            return
        table.add_columns("Task", *(f"{m}/{c}"[:16] for m, c in configs))
        for task in tasks:
            table.add_row(task, *(cell(config, task) for config in configs))
        table.add_row(Text("winrate", style="bold"), *rates)
        table.add_row(Text("wins/losses", style="dim"), *records)
