"""Imported trials in the screens and the report: the grid counts a cell's imported trials,
review says where a trial came from, the report how many trials of each source it counts.
The trials are real recorded Codex sessions imported with ``agentmeter import sessions``."""

from __future__ import annotations

from agentmeter_tui.core.reporting.build import report_from_store
from agentmeter_tui.core.store import Store
from agentmeter_tui.ui.data import trial_detail
from agentmeter_tui.ui.grid_state import GridState
from agentmeter_tui.ui.widgets.review_panels import usage_markup
from tests.interop.support import cli
from tests.interop.test_sessions import STORE, lay_out


def test_sources_show_in_grid_review_and_report(tmp_path, db):
    lay_out(tmp_path / "home", "codex", ("write-file", "reasoning"))
    code, err = cli("import", "sessions", "--cli", "codex", str(tmp_path / "home" / STORE["codex"]),
                    "--suite", "mine", "--db", str(db))
    assert code == 0, err
    store = Store(db)
    grid = GridState([], [])
    grid.load(store.views.grid_rows("mine"))
    (config,) = grid.by_cell
    assert grid.cell(config).imported == 2 and grid.totals().imported == 2
    first = store.trials("mine")[0]
    assert "imported from session:codex" in usage_markup(trial_detail(store, first["id"]))
    report = report_from_store(store, "mine")
    assert "trials by source: session:codex 2" in report.notes
