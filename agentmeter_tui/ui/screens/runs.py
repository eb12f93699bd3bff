"""Provides :class:`RunsScreen`: two runs compared (``agentmeter report --compare A B --tui``, or
``v`` on the report screen once a compared store is known), the TUI face of
``core.reporting.compare``: per configuration AMS and passes on each side, the paired difference
B - A with its 95 % interval and the share of resamples each side leads; per task the cells whose
selected run flipped or whose mean reward moved. B is this TUI's store; A is read from its path.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.widgets import DataTable, Static

from ...core.metrics.intervals import MIN_TASKS, TOO_FEW
from ...core.reporting.cells import DASH, fmt_score
from ...core.reporting.compare import RunComparison, compare_stores
from ..widgets.footer import KeysFooter

if TYPE_CHECKING:
    from ...core.metrics.attempts import Selection
from .base import SessionScreen

RESAMPLES = 2000


def _share(value: float | None) -> str:
    return DASH if value is None else f"{value * 100:.0f}%"


def _verdict(value: bool | None, colours: dict[str, str]) -> Text:
    if value is None:
        return Text(DASH, style="dim")
    return Text("pass" if value else "fail", style=colours.get("status-passed" if value else "status-failed", ""))


class RunsScreen(SessionScreen):
    REFRESH_SECONDS = 5.0
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="runs-back", tooltip="Back to the report"),
        Binding("s", "selection", "Latest/median", id="runs-selection",
                tooltip="Switch the trial-selection rule of AMS, passes and flips: latest or median trial"),
        Binding("f", "flips", "Flips only", id="runs-flips",
                tooltip="Per task: only the cells that flipped, or every cell that moved"),
        Binding("ctrl+r", "reload", "Reload", id="runs-reload", tooltip="Compare the two stores again"),
    ]

    def __init__(self, versus: Path) -> None:
        super().__init__(id="runs-screen")
        self.versus = Path(versus)
        self.selection: Selection = "latest"
        self.flips_only = False
        self.comparison: RunComparison | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="runs-title", classes="screen-title")
        yield Static("Per configuration · Δ = AMS(B) − AMS(A), paired two-level bootstrap over the shared tasks",
                     classes="section-title")
        yield DataTable(id="runs-configs", cursor_type="row", zebra_stripes=True)
        yield Static("", id="runs-cells-title", classes="section-title")
        yield DataTable(id="runs-cells", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        super().on_mount()
        self.action_reload()

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_selection(self) -> None:
        self.selection = "median" if self.selection == "latest" else "latest"
        self.action_reload()

    def action_flips(self) -> None:
        self.flips_only = not self.flips_only
        if self.comparison is not None:
            self._cells(self.comparison)

    def action_reload(self) -> None:
        self.query_one("#runs-title", Static).update(f"[b]Runs compared[/]: reading {escape(str(self.versus))} …")
        self.run_worker(self._load(), group="runs", exclusive=True, exit_on_error=False)

    async def _load(self) -> None:
        session = self.session
        try:
            # Two stores read and one bootstrap: off the event loop (the store thread is B's own).
            comparison = await asyncio.to_thread(compare_stores, self.versus, Path(session.db), session.suite_id,
                                                 selection=self.selection, resamples=RESAMPLES)
        except (LookupError, ValueError, OSError) as exc:
            self.query_one("#runs-title", Static).update(f"[b]Runs compared[/]: {escape(str(exc))}")
            return
        self.comparison = comparison
        self._show(comparison)

    def _show(self, cmp: RunComparison) -> None:
        only = (f" [$warning]· left out: {len(cmp.only[0])} only in A, {len(cmp.only[1])} only in B[/]"
                if any(cmp.only) else "")
        few = f" [$warning]· under {MIN_TASKS} tasks: no interval[/]" if len(cmp.tasks) < MIN_TASKS else ""
        self.query_one("#runs-title", Static).update(
            f"[b]Runs compared[/] A {escape(cmp.labels[0])} [$text-muted]→[/] B {escape(cmp.labels[1])}\n"
            f"{len(cmp.tasks)} shared tasks{only}{few} [$text-muted]│ selection:[/] {cmp.selection} "
            f"[$text-muted]│ {cmp.resamples} resamples, seed {cmp.seed}[/]")
        table = self.query_one("#runs-configs", DataTable)
        table.clear(columns=True)
        table.add_columns("Model", "CLI", "Pass A→B", "AMS A", "AMS B", "Δ", "Δ 95%", "P(B ahead)", "P(A ahead)")
        colours = self.app.theme_variables  # Rich styles take colours, not $variables
        for c in cmp.configs:
            d = c.difference
            interval, delta_style = TOO_FEW if d.too_few else DASH, ""
            if not d.too_few and d.low is not None:  # high None: unbounded above
                interval = f"{d.low:+.3f} – {'∞' if d.high is None else f'{d.high:+.3f}'}"
                if d.low > 0 or (d.high is not None and d.high < 0):  # the interval leaves 0 out: sure
                    delta_style = "bold " + colours.get("status-passed" if d.low > 0 else "status-failed", "")
            table.add_row(Text(c.config[0]), Text(c.config[1]), Text(f"{c.passes[0]} → {c.passes[1]}", justify="right"),
                          Text(fmt_score(c.ams[0]), justify="right"), Text(fmt_score(c.ams[1]), justify="right"),
                          Text(DASH if c.estimate is None else f"{c.estimate:+.3f}", style=delta_style, justify="right"),
                          Text(interval, style="dim" if d.too_few else "", justify="right"),
                          Text(_share(c.b_ahead), justify="right"), Text(_share(c.a_ahead), justify="right"))
        self._cells(cmp)

    def _cells(self, cmp: RunComparison) -> None:
        flips = sum(c.flipped for c in cmp.cells)
        moved = [c for c in cmp.cells if c.flipped or (not self.flips_only and c.changed)]
        self.query_one("#runs-cells-title", Static).update(
            f"Per task · {flips} flip(s) over {len(cmp.cells)} cells (▲ fail → pass, ▼ pass → fail) · "
            + ("only flips (f: every change)" if self.flips_only else "flips and reward changes (f: flips only)"))
        table = self.query_one("#runs-cells", DataTable)
        table.clear(columns=True)
        table.add_columns("Task", "Configuration", "A", "B", "", "Reward A", "Reward B", "Δ reward")
        colours = self.app.theme_variables  # Rich styles take colours, not $variables
        for c in moved:
            mark = Text("▲" if c.passed[1] else "▼", style="bold " + colours.get(
                "status-passed" if c.passed[1] else "status-failed", "")) if c.flipped else Text("")
            table.add_row(Text(c.task), Text(f"{c.config[0]}/{c.config[1]}"), _verdict(c.passed[0], colours),
                          _verdict(c.passed[1], colours), mark,
                          Text(fmt_score(c.reward[0]), justify="right"), Text(fmt_score(c.reward[1]), justify="right"),
                          Text(DASH if (change := c.reward_change) is None else f"{change:+.3f}", justify="right"))
        if not moved:
            table.add_row("no task changed", "", "", "", "", "", "", "")
