"""Provides :class:`CellUpdates`: change a DataTable's cells and re-render only those cells.

Textual's ``DataTable.update_cell`` bumps one table-wide counter that is part of every render
cache key, so changing one cell throws away the cached renders of all of them and the next
frame renders every visible cell through Rich again. With 1,000 running trials every cell of
the grid and every row of a trial list changes several times a second, and those full
re-renders were most of the app's time (and the frames a key press waited behind). Here the
changed cells' cache entries are dropped instead, and only their regions are repainted.

This reaches into the DataTable's private caches (Textual 8.x); if they are not there, it
falls back to ``update_cell``, which is correct, only slower.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.coordinate import Coordinate
from textual.widgets.data_table import ColumnKey, RowKey

_CACHES = ("_data", "_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache",
           "_row_locations", "_column_locations")


class CellUpdates:
    """Mixin for DataTable subclasses: :meth:`set_cells` updates cells without a full re-render."""

    def set_cells(self, changes: Mapping[tuple[str, str], Any]) -> None:
        """Set ``{(row key, column key): value}``; unknown keys are ignored."""
        table: Any = self
        if not changes:
            return
        if not all(hasattr(table, name) for name in _CACHES):
            for (row, column), value in changes.items():
                table.update_cell(row, column, value)
            return
        rows: set[RowKey] = set()
        cells: set[tuple[RowKey, ColumnKey]] = set()
        for (row, column), value in changes.items():
            row_key, column_key = RowKey(row), ColumnKey(column)
            if row_key not in table._row_locations or column_key not in table._column_locations:
                continue
            table._data[row_key][column_key] = value
            rows.add(row_key)
            cells.add((row_key, column_key))
        if not cells:
            return
        # Cache keys start (row key, column key, ...) for cells and (row key, ...) for rows;
        # row renderables are keyed (update count, row index).
        cell_cache, row_cache = table._cell_render_cache, table._row_render_cache
        for key in [k for k in cell_cache.keys() if (k[0], k[1]) in cells]:  # noqa: SIM118 (an LRUCache, not a dict)
            cell_cache.discard(key)
        for key in [k for k in row_cache.keys() if k[0] in rows]:  # noqa: SIM118
            row_cache.discard(key)
        indexes = {table._row_locations.get(row) for row in rows}
        renderables = table._row_renderable_cache
        for key in [k for k in renderables.keys() if k[1] in indexes]:  # noqa: SIM118
            renderables.discard(key)
        table._line_cache.clear()
        for row_key, column_key in cells:
            table.refresh_coordinate(Coordinate(table._row_locations.get(row_key),
                                                table._column_locations.get(column_key)))
