"""Placement you can see (issue 28): the fleet view, the node column and the panes' node, fed
by a snapshot shaped like the runner's on a 3-node fleet (``nodes`` as ``Feed.nodes`` sends
them, each meter's ``node`` as ``TrialRun.meter`` does); on a run without nodes nothing changes."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable, Static

from agentmeter_tui.ui.screens.cell import CellScreen
from agentmeter_tui.ui.screens.fleet import NO_FLEET, FleetScreen
from agentmeter_tui.ui.screens.live import LiveScreen
from agentmeter_tui.ui.widgets.trial_table import TrialTable
from tests.sample_data import T0, sample_feed
from tests.ui.conftest import SIZE, feed, make_app, notifications_of, settle

NODES = ["amf-n1", "amf-n2", "amf-n3"]


def fleet_feed(count: int = 6) -> list[dict]:
    """``sample_feed`` placed round-robin on three nodes, the third one down since 40 s."""
    messages = sample_feed(count=count)
    for message in messages:
        for meter in message.get("running", []) + message.get("meters", []):
            meter["node"] = NODES[(meter["id"] - 1000) % 3]
    running = {n: sum(1 for i in range(count) if i % 3 == k) for k, n in enumerate(NODES)}
    messages[0]["nodes"] = [
        {"name": "amf-n1", "state": "ready", "running": running["amf-n1"], "slots": 8, "seen": T0 + 31},
        {"name": "amf-n2", "state": "drain", "running": running["amf-n2"], "slots": 8, "seen": T0 + 31},
        {"name": "amf-n3", "state": "down", "running": running["amf-n3"], "slots": 8, "seen": T0 - 10}]
    return messages


def cells(table: DataTable, row: str) -> list[str]:
    return [str(c.plain if isinstance(c, Text) else c) for c in table.get_row(row)]


async def test_the_fleet_view_lists_nodes_and_drains_one(sample_db, fake_runner):
    app = make_app(sample_db, screen="grid", live=True, runner=fake_runner)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await feed(app, fleet_feed())
        await pilot.press("f")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        table = screen.query_one("#fleet-nodes", DataTable)
        assert [str(k.value) for k in table.rows] == NODES
        n1 = cells(table, "amf-n1")
        assert n1[:6] == ["amf-n1", "ready", "2/8", "2", "0", "0"]
        assert cells(table, "amf-n2")[1] == "drained" and cells(table, "amf-n3")[1] == "down"
        assert n1[-1] == "0:01 ago" and cells(table, "amf-n3")[-1] == "0:42 ago"  # the clock is T0 + 32
        told = notifications_of(app)
        await pilot.press("d")  # the cursor is on amf-n1, ready: drain it
        await pilot.press("down", "d")  # amf-n2, drained: make it active
        await pilot.press("down", "d")  # amf-n3, down: nothing to send
        await settle(pilot)
        assert fake_runner.requests == [("node", {"name": "amf-n1", "availability": "drain"}),
                                        ("node", {"name": "amf-n2", "availability": "active"})]
        assert any("amf-n3 is down" in t for t in told), told
        # The feed says the node drained: the row follows at the next flush.
        nodes = [{**n, "state": "drain"} if n["name"] == "amf-n1" else n for n in app.session.live.nodes]
        await feed(app, [{"type": "tick", "ts": T0 + 31, "meters": [], "finished": [], "nodes": nodes}])
        await settle(pilot)
        assert cells(table, "amf-n1")[1] == "drained"
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, FleetScreen)


async def test_trials_show_their_node_in_panes_cells_and_the_grid(sample_db):
    app = make_app(sample_db, screen="live", live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await feed(app, fleet_feed(count=4))
        await settle(pilot)
        assert isinstance(app.screen, LiveScreen)
        pane = app.screen.panes[1000]
        assert str(pane.border_title).endswith("· amf-n1")
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("g")
        await settle(pilot)
        meter = app.session.live.trials[1000].meter
        grid = app.screen
        grid.query_one("#grid").move_cursor(row=app.session.grid.models.index(meter["model"]),
                                            column=1 + app.session.grid.clis.index(meter["cli"]))
        await settle(pilot)
        detail = str(grid.query_one("#cell-detail", Static).render())
        assert "trials per node" in detail and "amf-n1 1" in detail
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, CellScreen)
        table = app.screen.query_one(TrialTable)
        assert table.column_keys[-1] == "node"
        assert cells(table, "1000")[-1] == "amf-n1"


async def test_without_nodes_nothing_changes_and_the_fleet_view_says_so(sample_db):
    app = make_app(sample_db, screen="live", live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await feed(app, sample_feed(count=4))
        await settle(pilot)
        pane = app.screen.panes[1000]
        assert "amf" not in str(pane.border_title)
        await pilot.press("g", "enter")
        await settle(pilot)
        assert isinstance(app.screen, CellScreen)
        assert "node" not in app.screen.query_one(TrialTable).column_keys
        await pilot.press("escape", "f")
        await settle(pilot)
        assert isinstance(app.screen, FleetScreen)
        assert str(app.screen.query_one("#fleet-empty", Static).render()) == NO_FLEET
        assert not app.screen.query_one("#fleet-nodes").display
