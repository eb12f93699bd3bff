"""Provides :class:`GridTable`: the model x CLI grid, one three-line cell per configuration.

Rows are models and columns CLIs, keyed by name, so a feed tick updates only the cells of
the trials it touched (``update_cell`` on change only; the caller wraps a batch in
``app.batch_update()``). Cell text is Rich ``Text`` styled from component classes whose
colours are theme variables; a theme switch re-renders every cell from the model.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.markup import escape
from textual.widgets import DataTable

from .. import format as fmt
from ..grid_state import CellStats, Config, GridState
from .styling import ComponentStyles
from .table_cells import CellUpdates

CELL_WIDTH = 24  # as wide as a cell gets
MIN_CELL_WIDTH = 17  # "669k tok  $1.08" still fits
SIDE_PANEL = 44  # columns the cell detail panel beside the grid wants
LABEL_COLUMN = "model"


def layout_for(width: int, grid: GridState) -> tuple[int, bool]:
    """(cell width, room for the side panel) for a screen ``width`` columns wide."""
    label = max(8, max((len(m) for m in grid.models), default=8) + 1)
    clis = max(1, len(grid.clis))
    room = width - label - 4 - 2 * (clis + 1)  # borders and cell padding
    if room - SIDE_PANEL >= clis * MIN_CELL_WIDTH:
        return min(CELL_WIDTH, (room - SIDE_PANEL) // clis), True
    return max(MIN_CELL_WIDTH, min(CELL_WIDTH, room // clis)), False


class GridTable(CellUpdates, ComponentStyles, DataTable):
    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {
        "grid--model", "grid--running", "grid--passed", "grid--killed", "grid--errored", "grid--thrash",
        "grid--invalid", "grid--usd", "grid--ams", "grid--muted",
    }

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="cell", zebra_stripes=False, fixed_columns=1, **kwargs)
        self._shown: dict[Config, str] = {}
        self._model: GridState | None = None

    def set_shape(self, grid: GridState, cell_width: int = CELL_WIDTH) -> None:
        """(Re)build rows and columns: at start, on a resize, when a new model or CLI appears."""
        self._model = grid
        self.cell_width = cell_width
        self.clear(columns=True)
        self._shown.clear()
        self.add_column("", key=LABEL_COLUMN, width=max(8, max((len(m) for m in grid.models), default=8) + 1))
        for cli in grid.clis:
            self.add_column(cli, key=cli, width=cell_width)
        for model in grid.models:
            self.add_row(Text(model, style=self._style("grid--model")), *([""] * len(grid.clis)), key=model,
                         height=3)
        grid.shape_changed = False
        self.update_cells(grid, [(m, c) for m in grid.models for c in grid.clis])
        if grid.clis:
            self.move_cursor(row=0, column=1)

    def update_cells(self, grid: GridState, configs: Iterable[Config]) -> int:
        """Redraw the given cells where their text changed; returns how many changed."""
        changes = {}
        for config in configs:
            model, cli = config
            if model not in grid.models or cli not in grid.clis:
                continue
            text = self.cell_text(grid.cell(config))
            signature = text.markup
            if self._shown.get(config) == signature:
                continue
            self._shown[config] = signature
            changes[(model, cli)] = text
        self.set_cells(changes)  # only these cells re-render, not the whole table
        return len(changes)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self._model is not None and self._shown:
            self._shown.clear()
            self.update_cells(self._model, [(m, c) for m in self._model.models for c in self._model.clis])

    def cell_text(self, cell: CellStats) -> Text:
        style = self._style
        text = Text(no_wrap=True, overflow="ellipsis")
        if cell.running:
            text.append(f"▶{cell.running} ", style("grid--running"))
        text.append(f"{cell.done}/{cell.total}", style("grid--muted") if not cell.done else "")
        if cell.done:
            text.append(f"  ✓{cell.passes}", style("grid--passed"))
        text.append("\n")
        if cell.empty:
            text.append("queued", style("grid--muted"))
        else:
            text.append(f"{fmt.tokens(cell.raw)} tok  ")
            text.append(fmt.usd(cell.usd) + ("+?" if cell.unpriced else ""), style("grid--usd"))
        text.append("\n")
        if cell.ams is not None:
            text.append(f"AMS {cell.ams:.3f}", style("grid--ams"))
        else:
            text.append("AMS —", style("grid--muted"))
        for count, glyph, name in ((cell.killed, "☠", "grid--killed"), (cell.errored, "!", "grid--errored"),
                                   (cell.thrash, "↻", "grid--thrash"), (cell.invalid, "⊘", "grid--invalid"),
                                   (cell.imported, "⇣", "grid--muted")):
            if count:
                text.append(f" {glyph}{count}", style(name))
        return text

    def shown_clis(self) -> tuple[int, int]:
        """(first, last) CLI columns in view, 1-based, given the horizontal scroll."""
        if self._model is None or not self._model.clis:
            return 0, 0
        widths = [column.get_render_width(self) for column in self.ordered_columns]
        room = self.scrollable_content_region.width - widths[0]  # the model column stays put
        first = last = 0
        x = 0
        for number, width in enumerate(widths[1:], 1):
            if x + width > self.scroll_x and not first:
                first = number
            if x + width <= self.scroll_x + room:
                last = number
            x += width
        return first or 1, max(last, first or 1)

    def overflow_note(self) -> str:
        """The border's note when some CLI columns are out of view: which are shown, and how to see more."""
        total = len(self._model.clis) if self._model is not None else 0
        first, last = self.shown_clis()
        if not total or (first <= 1 and last >= total):
            return ""
        arrows = ("← " if first > 1 else "") + ("→ " if last < total else "")
        return f"CLIs {first}-{last} of {total} · {arrows}for more"

    @property
    def current_config(self) -> Config | None:
        if self._model is None or not self.row_count:
            return None
        row, column = self.cursor_coordinate
        if column == 0 or row >= len(self._model.models) or column - 1 >= len(self._model.clis):
            return None
        return self._model.models[row], self._model.clis[column - 1]


def cell_markup(config: Config, cell: CellStats) -> str:
    """A cell's figures in full (the grid screen's side panel)."""
    model, cli = config
    lines = [f"[b]{escape(model)}[/] × [b]{escape(cli)}[/]", "",
             f"done      [b]{cell.done}[/]/{cell.total}    running [$status-running]{cell.running}[/]",
             f"passed    [$status-passed]{cell.passes}[/]       failed  {cell.done - cell.passes - cell.killed - cell.errored}",
             f"killed    [$status-killed]{cell.killed}[/]       errored [$status-errored]{cell.errored}[/]",
             f"thrashing [$flag-thrash]{cell.thrash}[/]       invalid [$status-invalid]{cell.invalid}[/]", "",
             f"tokens    [b]{fmt.tokens(cell.raw)}[/]",
             f"USD       [b $meter-usd]{fmt.usd(cell.usd)}[/]" + (f" (+{cell.unpriced} unpriced)" if cell.unpriced else ""),
             f"AMS       [b]{'—' if cell.ams is None else f'{cell.ams:.3f}'}[/]"]
    return "\n".join(lines)


def cell_summary_markup(cell: CellStats) -> str:
    """The same figures as :func:`cell_markup`, on one line (the cell screen's header)."""
    failed = cell.done - cell.passes - cell.killed - cell.errored
    parts = [f"done [b]{cell.done}[/]/{cell.total}", f"running [$status-running]{cell.running}[/]",
             f"passed [$status-passed]{cell.passes}[/]", f"failed {failed}", f"killed [$status-killed]{cell.killed}[/]",
             f"errored [$status-errored]{cell.errored}[/]", f"thrashing [$flag-thrash]{cell.thrash}[/]",
             f"invalid [$status-invalid]{cell.invalid}[/]", f"tokens [b]{fmt.tokens(cell.raw)}[/]",
             f"USD [b $meter-usd]{fmt.usd(cell.usd)}[/]", f"AMS [b]{'—' if cell.ams is None else f'{cell.ams:.3f}'}[/]"]
    return " [$text-muted]·[/] ".join(parts)
