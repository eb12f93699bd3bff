"""Provides :class:`CellScreen`: the trials of one grid cell (a model x CLI configuration).

Status, reason, tokens, USD and score per trial, live while they run. Enter opens a trial:
the review screen for a finished one, its live pane for a running one.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.widgets import DataTable, Static

from ...core.vocab import ACTIVE_STATUSES
from ..data import latest_scores
from ..grid_state import Config
from ..host import host
from ..widgets.footer import KeysFooter
from ..widgets.grid_table import cell_summary_markup
from ..widgets.money import HoldBanner
from ..widgets.trial_table import TrialTable
from .base import SessionScreen
from .money import MoneyKeys


class CellScreen(MoneyKeys, SessionScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="cell-back"),
                Binding("enter", "open_trial", "Open trial", id="open-trial",
                        tooltip="Review a finished trial, or show a running one's pane"),
                Binding("R", "rerun_trial", "Rerun trial", id="rerun-trial",
                        tooltip="Append a new attempt of the selected finished trial (asks; nothing is overwritten)")]

    def __init__(self, config: Config) -> None:
        super().__init__(classes="cell-screen")
        self.config = config

    def compose(self) -> ComposeResult:
        model, cli = self.config
        yield Static(f"[b]{escape(model)}[/] × [b]{escape(cli)}[/] · trials of this cell · enter opens a trial "
                     "(review, or its pane while it runs)", classes="screen-title")
        yield HoldBanner()
        yield Static("", id="cell-summary")
        yield TrialTable(columns=("id", "task", "trial", "status", "reason", "tokens", "usd", "score", "flags"),
                         id="cell-trials")
        yield Static("", id="cell-reason")  # the highlighted trial's whole reason
        yield KeysFooter()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(TrialTable).focus()
        self.run_worker(self._load_scores(), exit_on_error=False)

    async def _load_scores(self) -> None:
        if self.session.suite_id is not None:
            self.session.scores.update(await self.session.store.call(latest_scores, self.session.suite_id))
        self.flush()

    def flush(self) -> None:
        grid, scores = self.session.grid, self.session.scores
        self.query_one("#cell-summary", Static).update(cell_summary_markup(grid.cell(self.config)), layout=False)
        rows = [{"id": t.id, "task": t.task, "trial": t.trial, "status": t.status, "reason": t.reason, "raw": t.raw,
                 "cost_usd": t.cost, "score": scores.get(t.id), "flags": t.flags, "node": t.node}
                for t in grid.cell_trials(self.config)]
        table = self.query_one(TrialTable)
        if any(row["node"] for row in rows):  # a fleet run: which node each trial ran on
            table.add_key_column("node")
        table.sync(rows)
        self._show_reason()

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_reason()

    def _show_reason(self) -> None:
        """The highlighted trial's reason in full, below the table (and as its tooltip)."""
        table = self.query_one(TrialTable)
        trial = self.session.grid.trials.get(table.current_id or -1)
        reason = trial.reason if trial is not None else None
        text = f"#{trial.id} {escape(trial.status)}: {escape(reason)}" if trial is not None and reason else ""
        self.query_one("#cell-reason", Static).update(text, layout=False)
        table.tooltip = reason or None

    def action_rerun_trial(self) -> None:
        trial_id = self.query_one(TrialTable).current_id
        if trial_id is not None:
            self.rerun_trial(self.session.grid.trials.get(trial_id))

    async def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        await self.action_open_trial()

    async def action_open_trial(self) -> None:
        trial_id = self.query_one(TrialTable).current_id
        if trial_id is None:
            return
        trial = self.session.grid.trials.get(trial_id)
        if trial is not None and trial.status in ACTIVE_STATUSES:
            await host(self.app).open_live(trial_id)
        else:
            await host(self.app).open_review(trial_id)
