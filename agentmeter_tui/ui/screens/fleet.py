"""Provides :class:`FleetScreen`: the nodes a fleet run places its trials on (issue 28).

One row per node as the runner's feed last described it: its state (ready, drained, down),
the slots its trials hold out of those it has, the suite's trials on it by state, and how long
ago the manager last reported it ready (its heartbeats arriving). Trials per node come from the
grid's trials, which are the store's rows kept current by the feed, so they agree with the
store. ``d`` drains the highlighted node or makes it active again: the runner asks its
sandbox (the ``node`` op), which makes the engine's call; the change shows when the feed next
sends the nodes. A run whose sandbox places no trials on nodes, or no runner, has no fleet.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ...core.vocab import ACTIVE_STATUSES
from .. import format as fmt
from ..widgets.footer import KeysFooter
from ..widgets.money import HoldBanner
from .base import SessionScreen

if TYPE_CHECKING:
    from ...core.run.control import NodeState

NO_FLEET = "no fleet: this run's sandbox places no trials on nodes"
STATE_TEXT = {"ready": "ready", "drain": "drained", "down": "down"}
STATE_STYLE = {"ready": "status-passed", "drain": "warning", "down": "status-invalid"}
COUNTED = ("running", "passed", "failed", "infra-invalid")
COLUMNS = (("node", 16), ("state", 9), ("slots", 8), ("running", 8), ("passed", 7), ("failed", 7),
           ("infra-invalid", 13), ("heartbeat", 14))
FLEET_BINDING = Binding("f", "fleet", "Fleet", id="fleet",
                        tooltip="The fleet's nodes: state, slots in use, trials per node; drain or activate one")


def per_node(trials) -> dict[str, Counter]:
    """``{node: Counter(state)}`` of trials (``TrialSummary``), with every active status as running."""
    counts: dict[str, Counter] = {}
    for trial in trials:
        if trial.node is not None:
            state = "running" if trial.status in ACTIVE_STATUSES else trial.status
            counts.setdefault(trial.node, Counter())[state] += 1
    return counts


class FleetScreen(SessionScreen):
    REFRESH_SECONDS = 1.0  # the feed sends the nodes at most once a second
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="fleet-back"),
                Binding("d", "toggle_drain", "Drain / activate", id="drain",
                        tooltip="Drain the highlighted node (it takes no new trial; its running ones go on), "
                                "or make a drained node active again")]

    def __init__(self) -> None:
        super().__init__(id="fleet-screen")
        self._shown: dict[str, tuple] = {}

    def compose(self) -> ComposeResult:
        yield Static("[b]Fleet[/] · the nodes this run places trials on · d drains or activates a node",
                     classes="screen-title")
        yield HoldBanner()  # a cap reached holds the schedule: said here too, as on every screen
        yield Static("", id="fleet-empty")
        yield DataTable(id="fleet-nodes", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        for label, width in COLUMNS:
            table.add_column(label, key=label, width=width)
        table.focus()
        self.flush()

    def flush(self) -> None:
        session = self.session
        nodes = session.live.nodes if session.live_mode else []
        empty, table = self.query_one("#fleet-empty", Static), self.query_one(DataTable)
        empty.display, table.display = not nodes, bool(nodes)
        if not nodes:
            empty.update(NO_FLEET + ("" if session.live_mode else " (no runner attached)"))
            return
        counts = per_node(session.grid.trials.values())
        now, colours = session.live.clock(), self.app.theme_variables  # Rich styles take colours, not $variables
        wanted = {}
        for node in nodes:
            name, state, seen = node["name"], node["state"], node.get("seen")
            by_state = counts.get(name, Counter())
            wanted[name] = (
                Text(name), Text(STATE_TEXT.get(state, state), f"bold {colours.get(STATE_STYLE.get(state, ''), '')}"),
                Text(f"{node['running']}/{node.get('slots') or '?'}", justify="right"),
                *(Text(str(by_state[s]), justify="right") for s in COUNTED),
                Text("—" if seen is None else f"{fmt.duration(now - seen)} ago", justify="right"))
        if list(wanted) != list(self._shown):
            table.clear()
            for name, cells in wanted.items():
                table.add_row(*cells, key=name)
        else:
            for name, cells in wanted.items():
                for (label, _), before, after in zip(COLUMNS, self._shown[name], cells):
                    if before != after:
                        table.update_cell(name, label, after)
        self._shown = wanted

    def _current(self) -> NodeState | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((n for n in self.session.live.nodes if n["name"] == key), None)

    def action_toggle_drain(self) -> None:
        node = self._current()
        if node is None:
            self.notify(NO_FLEET, severity="warning")
            return
        if node["state"] == "down":
            self.notify(f"{node['name']} is down: it takes nothing until it is back.", severity="warning")
            return
        availability = "active" if node["state"] == "drain" else "drain"
        self.run_worker(self._set(node["name"], availability), exit_on_error=False)

    async def _set(self, name: str, availability: str) -> None:
        try:
            await self.session.request("node", name=name, availability=availability)
        except Exception as exc:
            self.notify(f"Node {name}: {exc}", severity="error")
            return
        self.notify(f"{name} drained: no new trial goes there." if availability == "drain"
                    else f"{name} is active: it takes new trials again.")
