"""Provides :class:`GridScreen`, the home screen: the model x CLI grid of the suite.

Each cell sums its trials: done/total, running, passes, raw tokens, USD, AMS so far, and
markers for killed, errored, thrashing and infra-invalid trials. The side panel details the
highlighted cell and the table below lists its trials; Enter opens the cell. Cells are
redrawn only when their trials changed; AMS is recomputed from the store in the background
when trials finish, at most every few seconds.
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import DataTable, Static

from ..data import ams_by_config
from ..grid_state import Config
from ..widgets.footer import KeysFooter
from ..widgets.grid_table import GridTable, cell_markup, layout_for
from ..widgets.money import mark_paused, paused_scopes
from ..widgets.run_bar import RunBar, preparing_text
from ..widgets.trial_table import TrialTable
from .base import SessionScreen
from .fleet import FLEET_BINDING, FleetScreen
from .money import MoneyKeys

if TYPE_CHECKING:
    from textual.worker import WorkType

AMS_EVERY = 3.0  # seconds between AMS recomputations while trials finish
PREVIEW_EVERY = 1.0  # seconds between redraws of the highlighted cell's trial list while its trials run

LEGEND = ("[$status-running]▶[/] running  [$status-passed]✓[/] passed  [$status-killed]☠[/] killed  "
          "[$status-errored]![/] errored  [$flag-thrash]↻[/] thrashing  [$status-invalid]⊘[/] infra-invalid  "
          "⇣ imported  +? some cost unpriced")


class GridScreen(MoneyKeys, SessionScreen):
    # Cell sums redraw twice a second: each changed cell is a Rich render, and with every cell
    # changing on every feed tick (1,000 running trials) faster redraws only cost key latency.
    REFRESH_SECONDS = 0.5
    BINDINGS = [Binding("enter", "open_cell", "Open cell", id="open-cell", tooltip="Open the highlighted cell's trials"),
                Binding("R", "rerun_cell", "Rerun", id="rerun-cell",
                        tooltip="Rerun the cell's infra-invalid, errored or killed trials as new attempts (asks)"),
                Binding("b", "cell_budget", "Cell budget", id="cell-budget",
                        tooltip="USD, tokens or seconds for every trial of this model x CLI (running and to come)"),
                Binding("M", "pause_scope('model')", "Pause model", id="pause-model",
                        tooltip="Pause or resume the highlighted cell's model (its running trials go on)"),
                Binding("C", "pause_scope('cli')", "Pause CLI", id="pause-cli",
                        tooltip="Pause or resume the highlighted cell's CLI (its running trials go on)"),
                Binding("dollar_sign", "raise_cap", "Run cap", id="raise-cap",
                        tooltip="Raise the run's cap (a reached cap holds the schedule; raising it resumes)"),
                FLEET_BINDING]

    def __init__(self) -> None:
        super().__init__(id="grid-screen")
        self._ams_version = -1
        self._ams_at = 0.0
        self._preview: Config | None = None
        self._preview_at = 0.0  # monotonic time the preview list was last redrawn
        self._preview_stale = False  # its trials changed since
        self._detail = ""  # the side panel's markup as drawn
        self._paused: tuple | None = None  # the paused models and CLIs marked on the grid

    def compose(self) -> ComposeResult:
        yield RunBar(id="run-bar")
        with Horizontal(id="grid-area"):
            yield GridTable(id="grid")
            with Vertical(id="grid-side"):
                yield Static("", id="cell-detail")
                yield Static(LEGEND, id="legend")
        yield Static("", id="preview-title", classes="section-title")
        yield TrialTable(id="cell-preview")
        yield KeysFooter()

    def on_mount(self) -> None:
        super().on_mount()
        self._reshape()
        self.query_one(GridTable).focus()
        self.flush()

    def flush(self) -> None:
        session = self.session
        grid, table = session.grid, self.query_one(GridTable)
        if grid.shape_changed:
            self._reshape()
        dirty = grid.take_dirty()
        if dirty:
            with self.app.batch_update():
                table.update_cells(grid, dirty)
        self.query_one(RunBar).show(session, timed=self.timed)
        if (paused := paused_scopes(session)) != self._paused:
            self._paused = paused
            mark_paused(table, *paused)
        note = table.overflow_note()  # columns out of view are said, never silently missing
        if note != (table.border_subtitle or ""):
            table.border_subtitle = note
        preparing = preparing_text(session)  # task images building: the cells wait for it, say so
        building = f"⚙ {escape(preparing)}" if preparing else ""  # a narrow border: the build first
        if building != (table.border_title or ""):
            table.border_title = building
        # The list's figures follow its trials once a second: with a thousand trials running,
        # redrawing it on every flush was most of what a key press on this screen waited behind.
        self._preview_stale = self._preview_stale or self._preview in dirty
        self._show_cell(table.current_config,
                        force=self._preview_stale and time.monotonic() - self._preview_at >= PREVIEW_EVERY)
        self._maybe_update_ams()

    def _reshape(self) -> None:
        """Fit the cells to the screen; the side panel goes when the grid needs its columns."""
        table = self.query_one(GridTable)
        width, side = layout_for(self.size.width or 160, self.session.grid)
        self.query_one("#grid-side").display = side
        self._fit_height()
        cursor = table.cursor_coordinate if table.row_count else None
        table.set_shape(self.session.grid, width)
        self._paused = None  # the new shape's labels are plain: mark them again
        if cursor is not None and cursor.row < table.row_count and cursor.column < len(table.columns):
            table.move_cursor(row=cursor.row, column=cursor.column)

    def _fit_height(self) -> None:
        """Every model row, when the screen has them: three lines each, the header, the border and
        a scrollbar; the trial list below keeps 6 lines. (62 % of a short screen clipped a row.)"""
        height = self.size.height or 48
        needed = 3 * len(self.session.grid.models) + 4
        self.query_one("#grid-area").styles.max_height = max(int(height * 0.62), min(needed, height - 10))

    def on_resize(self) -> None:
        self._fit_height()
        table = self.query_one(GridTable)
        if getattr(table, "cell_width", None) != layout_for(self.size.width or 160, self.session.grid)[0]:
            self._reshape()

    def _show_cell(self, config: Config | None, force: bool = False) -> None:
        if config is None:
            return
        grid = self.session.grid
        nodes = grid.nodes_of(config)  # a fleet run: where the cell's trials ran
        placed = ("\n[$text-muted]trials per node[/] " + " · ".join(f"{escape(n)} {c}" for n, c in nodes.items())
                  if nodes else "")
        detail = cell_markup(config, grid.cell(config)) + placed
        if detail != self._detail:  # most flushes change nothing in the highlighted cell
            self._detail = detail
            self.query_one("#cell-detail", Static).update(detail, layout=False)
        if config != self._preview or force:
            if config != self._preview:  # the title names the cell: a forced redraw keeps it
                self.query_one("#preview-title", Static).update(
                    f"Trials of [b]{escape(config[0])} × {escape(config[1])}[/] · enter opens the cell",
                    layout=False)  # one fixed line: no re-layout of the screen
            self._preview, self._preview_at, self._preview_stale = config, time.monotonic(), False
            scores = self.session.scores
            rows = [{"id": t.id, "task": t.task, "trial": t.trial, "status": t.status, "reason": t.reason,
                     "raw": t.raw, "cost_usd": t.cost, "score": scores.get(t.id), "flags": t.flags}
                    for t in grid.cell_trials(config)]
            self.query_one(TrialTable).sync(rows)

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        if event.data_table.id == "grid":
            # The moved cursor is drawn first; the side panel and the trial list follow a frame later.
            self.call_after_refresh(lambda: self._show_cell(self.query_one(GridTable).current_config))

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        if event.data_table.id == "grid":
            self.action_open_cell()

    def money_config(self) -> Config | None:
        return self.query_one(GridTable).current_config

    def action_open_cell(self) -> None:
        config = self.query_one(GridTable).current_config
        if config is not None:
            from .cell import CellScreen

            self.app.push_screen(CellScreen(config))

    def action_fleet(self) -> None:
        self.app.push_screen(FleetScreen())

    def _maybe_update_ams(self) -> None:
        session = self.session
        finished = session.grid.finished_version
        if session.suite_id is None or finished == self._ams_version or time.monotonic() - self._ams_at < AMS_EVERY:
            return
        self._ams_version, self._ams_at = finished, time.monotonic()
        # a callable, not a coroutine: a load cancelled before it starts leaves none unawaited
        work: WorkType[None] = partial(self._load_ams, session.suite_id)  # (Textual's WorkType solves to Never for it)
        self.run_worker(work, group="ams", exclusive=True, exit_on_error=False)

    async def _load_ams(self, suite_id: str) -> None:
        try:
            ams = await self.session.store.call(ams_by_config, suite_id)
        except Exception as exc:  # a report that cannot be built yet (e.g. a suite folder gone) is not fatal
            self.log.warning(f"AMS unavailable: {exc!r}")
            return
        self.session.grid.set_ams(ams)
