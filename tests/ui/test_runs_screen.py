"""The runs-comparison screen (``report --compare A B --tui``; ``v`` on the report screen): its
rows against flips and reward changes counted here from each store's own runs, and its keys."""

from __future__ import annotations

from textual.widgets import DataTable

from agentmeter_tui.core.metrics.attempts import select_attempts
from agentmeter_tui.core.reporting import attempt_from_record
from agentmeter_tui.core.reporting.records import import_records
from agentmeter_tui.core.reporting.synthetic import synthetic_records
from agentmeter_tui.core.store import Store
from agentmeter_tui.ui.app import AgentMeterApp
from agentmeter_tui.ui.screens.report import ReportScreen
from agentmeter_tui.ui.screens.runs import RunsScreen
from agentmeter_tui.ui.session import UiSession
from agentmeter_tui.ui.settings import UiSettings

from .conftest import SIZE, settle


def _store(path, seed):
    records = list(synthetic_records(models=2, clis=2, tasks=12, trials=3, seed=seed, infra_rate=0.0))
    store = Store(path)
    import_records(store, records)
    store.close()
    return [attempt_from_record(r) for r in records]


def _expected(a, b):
    chosen = [select_attempts(runs) for runs in (a, b)]
    flips = sum(chosen[0][k].success != chosen[1][k].success for k in chosen[0].keys() & chosen[1].keys())
    moved = 0
    for key in chosen[0].keys() & chosen[1].keys():
        rewards = [[r.reward for r in runs if (r.config, r.task) == key and r.valid] for runs in (a, b)]
        means = [sum(x) / len(x) for x in rewards]
        moved += chosen[0][key].success != chosen[1][key].success or abs(means[1] - means[0]) > 1e-9
    return flips, moved


async def test_the_screen_lists_configurations_flips_and_changes(tmp_path):
    a, b = _store(tmp_path / "a.db", 7), _store(tmp_path / "b.db", 8)
    flips, moved = _expected(a, b)
    assert 0 < flips < moved
    app = AgentMeterApp(UiSession(tmp_path / "b.db", reviewer="alice", live=False), screen="runs",
                        settings=UiSettings(), connect=False, versus=tmp_path / "a.db")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and screen.comparison is not None
        assert screen.query_one("#runs-configs", DataTable).row_count == 4
        cells = screen.query_one("#runs-cells", DataTable)
        assert cells.row_count == moved
        assert f"{flips} flip(s)" in str(screen.query_one("#runs-cells-title").render())
        await pilot.press("f")
        await settle(pilot)
        assert cells.row_count == flips
        assert "12 shared tasks" in str(screen.query_one("#runs-title").render())
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, ReportScreen)
        await pilot.press("v")  # the report screen opens it again
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)


async def test_v_without_a_compared_store_says_how(sample_db):
    app = AgentMeterApp(UiSession(sample_db, reviewer="alice", live=False), screen="report", settings=UiSettings(),
                        connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, ReportScreen)
        assert any("--compare" in str(n.message) for n in app._notifications)
