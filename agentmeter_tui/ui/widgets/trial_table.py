"""Provides :class:`TrialTable`: trials as keyed rows, updated in place.

Used for a cell's trials, the live screen's list of running trials that have no pane, and
the review screen's other trials of the cell. ``sync(rows)`` adds new keys, updates only the
cells whose text changed and removes rows that are gone (``clear`` when most are), the way
dolphie keeps its process list cheap. With ``visible_only`` (the live screen's list of a
thousand running trials) the figures of rows out of view are brought up to date only when
they scroll into view: formatting every row every second was most of the live screen's time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from .. import format as fmt
from .styling import ComponentStyles
from .table_cells import CellUpdates

COLUMNS = (("id", "#", 6), ("task", "task", 18), ("trial", "t", 3), ("config", "model × cli", 24),
           ("status", "status", 16), ("reason", "reason", 22), ("tokens", "tokens", 8), ("usd", "USD", 9),
           ("score", "score", 6), ("flags", "flags", 16), ("node", "node", 12))
STATUS_CLASS = {"infra-invalid": "trials--invalid"}
# On a narrow terminal these columns give up width, in this order, down to their least (the
# figures and the score keep theirs: a cut score column read as no score).
SHRINK = (("reason", 6), ("flags", 4), ("task", 10), ("config", 14), ("status", 10), ("node", 6), ("id", 5),
          ("tokens", 6))
PADDING = 2  # a DataTable cell's padding, both sides


def fitted_widths(keys: Sequence[str], available: int, wanted: dict[str, int] | None = None) -> dict[str, int]:
    """Each column's width so that ``keys`` fit ``available`` cells where they can."""
    widths = {key: (wanted or {}).get(key, width) for key, _label, width in COLUMNS if key in keys}
    over = sum(widths.values()) + PADDING * len(widths) - available
    for key, least in SHRINK:
        if over <= 0:
            break
        if key in widths:
            cut = min(over, max(0, widths[key] - least))
            widths[key] -= cut
            over -= cut
    return widths


class TrialTable(CellUpdates, ComponentStyles, DataTable):
    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {
        "trials--queued", "trials--starting", "trials--running", "trials--verifying", "trials--passed",
        "trials--failed", "trials--killed", "trials--errored", "trials--invalid", "trials--muted", "trials--thrash",
    }

    def __init__(self, columns: Sequence[str] = ("id", "task", "trial", "status", "reason", "tokens", "usd",
                                                 "score", "flags"), widths: dict[str, int] | None = None,
                 **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.column_keys = [c for c in columns]
        self.widths = widths or {}
        self._rows: dict[int, tuple] = {}
        self._latest: dict[int, Mapping[str, Any]] = {}  # rows given but not drawn yet (out of view)
        self._given: list[Mapping[str, Any]] = []  # the rows of the last sync (drawn again at a new width)
        self._fitted: dict[str, int] = {}  # the widths in use

    def on_focus(self) -> None:
        self.show_cursor = True

    def on_blur(self) -> None:
        self.show_cursor = False  # a highlighted row in a list nobody is using reads as a selection

    def on_mount(self) -> None:
        self.show_cursor = self.has_focus
        self._add_columns()

    def _add_columns(self) -> None:
        spec = {key: label for key, label, _width in COLUMNS}
        self._fitted = fitted_widths(self.column_keys, (self.size.width or 10_000) - 2, self.widths)
        for key in self.column_keys:
            self.add_column(spec[key], key=key, width=self._fitted[key])

    def on_resize(self) -> None:
        """Fit the columns to the new width (the reason cut at a word again)."""
        if fitted_widths(self.column_keys, self.size.width - 2, self.widths) != self._fitted:
            self._redraw()

    def _redraw(self) -> None:
        cursor = self.cursor_coordinate
        self.clear(columns=True)
        self._rows.clear()
        self._add_columns()
        self.sync(self._given)
        if self.row_count:
            self.move_cursor(row=min(cursor.row, self.row_count - 1))

    def _width(self, key: str) -> int:
        return self._fitted.get(key) or self.widths.get(key) or next(w for k, _label, w in COLUMNS if k == key)

    def cells(self, row: Mapping[str, Any]) -> tuple:
        status = row.get("status") or "?"
        raw = row.get("raw")
        if raw is None:
            raw = sum((row.get("tokens") or {}).values())
        score = row.get("score")
        flags = row.get("flags") or ()
        values = {
            "id": Text(f"#{row['id']}", self._style("trials--muted")),
            "task": row.get("task") or row.get("task_id") or "",
            "trial": str(row.get("trial") or row.get("trial_index") or ""),
            "config": f"{row.get('model')} × {row.get('cli')}",
            "status": Text(f"{fmt.STATUS_GLYPH.get(status, '?')} {status}",
                           self._style(STATUS_CLASS.get(status, f"trials--{status}"))),
            # cut at a word (the cell screen shows the highlighted trial's whole reason)
            "reason": Text(fmt.clip_words(row.get("reason") or "", self._width("reason")), self._style("trials--muted")),
            "tokens": Text(fmt.tokens(raw), justify="right"),
            "usd": Text(fmt.usd(row.get("cost_usd"), unpriced="—"), justify="right"),
            "score": Text("—" if score is None else str(score), self._style("trials--muted") if score is None else "",
                          justify="center"),
            "flags": Text(" ".join(f for f in flags if f != "unpriced"), self._style("trials--thrash")),
            "node": Text(row.get("node") or "", self._style("trials--muted")),
        }
        return tuple(values[key] for key in self.column_keys)

    def sync(self, rows: Sequence[Mapping[str, Any]], visible_only: bool = False) -> None:
        """Make the table show ``rows`` (each with an ``id``), touching only what changed.

        ``visible_only``: rows already in the table but out of view keep their old figures
        until they scroll into view (see ``watch_scroll_y``)."""
        self._given = list(rows)
        wanted = {row["id"]: row for row in rows}
        gone = [key for key in self._rows if key not in wanted]
        if gone and len(gone) > len(self._rows) // 2:
            self.clear()
            self._rows.clear()
        else:
            for key in gone:
                self.remove_row(str(key))
                del self._rows[key]
        in_view = self._in_view() if visible_only else None
        self._latest = wanted if visible_only else {}
        changes = {}
        for trial_id, row in wanted.items():
            old = self._rows.get(trial_id)
            if old is None:
                cells = self.cells(row)
                self.add_row(*cells, key=str(trial_id))
                self._rows[trial_id] = cells
            elif in_view is None or trial_id in in_view:
                changes.update(self._changes(trial_id, row))
        self.set_cells(changes)

    def _changes(self, trial_id: int, row: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
        cells = self.cells(row)
        old = self._rows.get(trial_id)
        self._rows[trial_id] = cells
        if old is None or old == cells:
            return {}
        return {(str(trial_id), key): after for key, before, after in zip(self.column_keys, old, cells)
                if before != after}

    def _in_view(self) -> set[int]:
        top = int(self.scroll_y)
        ids = set()
        for index in range(max(0, top - 1), min(self.row_count, top + self.size.height + 1)):
            key = self._row_locations.get_key(index)
            if key is not None and key.value is not None:
                ids.add(int(key.value))
        return ids

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._latest and int(old_value) != int(new_value):
            changes = {}
            for trial_id in self._in_view():
                row = self._latest.get(trial_id)
                if row is not None and trial_id in self._rows:
                    changes.update(self._changes(trial_id, row))
            self.set_cells(changes)

    def add_key_column(self, key: str) -> None:
        """Show one more column (a run's first trial placed on a fleet node brings ``node``):
        the rows are drawn again with it."""
        if key in self.column_keys:
            return
        self.column_keys.append(key)
        self._redraw()

    @property
    def current_id(self) -> int | None:
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return int(row_key.value) if row_key.value is not None else None
