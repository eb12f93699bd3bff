"""Provides :class:`LiveScreen`: a tiled pane per running trial, the rest in a list.

As many panes as fit the terminal (at least ``PANE_MIN`` cells each); further running trials
are listed below with their meters, and Enter on one pins it into a pane. Panes stay in
place while their trial runs, so the eye can follow them; a finished trial's pane lingers
a few seconds with its final status, then gives its slot away. Keys act on the selected
pane: kill (after a confirm, recorded as ``operator``), raise its budget, maximize.

Panes are *selected*, not focused: a change of Textual focus repaints the whole screen, a
change of selection only the two panes whose border changes, which keeps keys fast while
dozens of trials stream.
"""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.widgets import DataTable, Static

from ...core.run.budget_hold import HOLD_MAX
from .. import format as fmt
from ..data import tail_events
from ..live_state import TickSummary
from ..widgets.footer import KeysFooter
from ..widgets.run_bar import RunBar
from ..widgets.trial_pane import TrialPane
from ..widgets.trial_table import TrialTable
from .base import SessionScreen
from .dialogs import BudgetDialog, ConfirmDialog
from .fleet import FLEET_BINDING, FleetScreen
from .money import MoneyKeys

PANE_MIN = (56, 13)  # columns, rows a pane needs to be readable
NUMBERS_EVERY = 1.0  # seconds between redraws of the panes' meters and clocks, all in the same frame;
# transcripts redraw on every flush that brought them lines (at most as often as the feed ticks, 10 frames/s).
# Together: a frame a second with nothing streaming, not one per pane.
LIST_EVERY = 1.0  # seconds between redraws of the list of trials without a pane
LINGER = 5.0  # seconds a finished trial keeps its pane
SEED_EVENTS = 200  # history read from the store for a pane opened mid-trial


class LiveScreen(MoneyKeys, SessionScreen):
    REFRESH_SECONDS = 0.1  # the feed's tick: one frame per tick
    AUTO_FOCUS = ""  # nothing takes focus on its own: keys go to the selected pane (None would mean "*")
    BINDINGS = [
        Binding("k", "kill", "Kill", id="kill", tooltip="Kill the selected trial (asks first; reason: operator)"),
        Binding("b", "budget", "Raise budget", id="budget", tooltip="Raise the selected trial's budgets"),
        Binding("B", "budget_all", "Raise all budgets", id="budget-all", show=False,
                tooltip="Raise the budgets of every running trial and of the trials still to start"),
        Binding("dollar_sign", "raise_cap", "Run cap", id="live-raise-cap",
                tooltip="Raise the run's cap (a reached cap holds the schedule; raising it resumes)"),
        Binding("m", "maximize", "Maximize", id="maximize", tooltip="Maximize the selected pane (esc restores)"),
        Binding("escape", "minimize", "Restore", id="minimize", show=False),
        Binding("right", "select_pane(1)", "Next pane", id="pane-right", show=False),
        Binding("left", "select_pane(-1)", "Previous pane", id="pane-left", show=False),
        Binding("down", "select_pane('down')", "Pane below", id="pane-down", show=False),
        Binding("up", "select_pane('up')", "Pane above", id="pane-up", show=False),
        FLEET_BINDING,
    ]

    def __init__(self) -> None:
        super().__init__(id="live-screen")
        self.panes: dict[int, TrialPane] = {}
        self.pinned: list[int] = []
        self.finished_at: dict[int, float] = {}
        self.columns = 1
        self._numbers_at = 0.0  # the live clock when the panes' numbers were last drawn
        self._fed = True  # a feed message came since the last flush
        self._list_at = 0.0  # monotonic time of the last redraw of the list
        self._listed: list[int] = []
        self._overflow_title = ""
        self.selected: int | None = None  # the trial whose pane the keys act on

    def compose(self) -> ComposeResult:
        yield RunBar(id="run-bar")
        yield Static("", id="live-empty")
        yield Grid(id="panes")
        yield Static("", id="overflow-title", classes="section-title")
        yield TrialTable(columns=("id", "task", "trial", "config", "status", "tokens", "usd", "flags"), id="overflow")
        yield KeysFooter()

    def on_mount(self) -> None:
        super().on_mount()
        self.flush()

    def on_feed(self, summary: TickSummary | None) -> None:
        self._fed = True
        if summary is None:  # the feed ended
            return
        now = self.session.live.clock()
        for meter in summary.finished:
            if meter["id"] is not None:  # (the live state keeps only meters with an id)
                self.finished_at.setdefault(meter["id"], now)

    def on_resize(self) -> None:
        self.flush()

    # -- layout ----------------------------------------------------------------------------------

    def capacity(self, overflow: int) -> tuple[int, int]:
        width, height = self.size.width or 160, self.size.height or 48
        reserved = 2 + (min(overflow, 6) + 2 if overflow else 0)  # run bar, footer, overflow list
        columns = max(1, width // PANE_MIN[0])
        rows = max(1, (height - reserved) // PANE_MIN[1])
        return columns, rows

    def plan(self) -> tuple[list[int], list[int]]:
        """(trial ids to show in panes, in order; running trials left for the list)."""
        live = self.session.live
        now = live.clock()
        running = [t.id for t in live.running()]
        running_set = set(running)
        self.pinned = [i for i in self.pinned if i in running_set]
        keep = [i for i in self.panes if i in running_set]
        lingering = [i for i in self.panes if i not in running_set and i in live.trials
                     and now - self.finished_at.setdefault(i, now) < LINGER]
        candidates = [i for i in self.pinned if i not in keep] + [i for i in running if i not in keep
                                                                   and i not in self.pinned]
        columns, rows = self.capacity(max(0, len(running) - len(keep)))
        slots = columns * rows
        for pin in [i for i in self.pinned if i not in keep]:
            if len(keep) >= slots:  # a pinned trial evicts the newest unpinned pane
                unpinned = [i for i in keep if i not in self.pinned]
                if unpinned:
                    keep.remove(unpinned[-1])
        keep = keep[:slots]
        # A trial that just ended keeps its pane a moment (the operator sees the kill land)
        # before a waiting trial takes the slot; while running trials wait for a pane, only
        # the selected one does (its operator is looking at it): panes are for running trials.
        if candidates:
            lingering = [i for i in lingering if i == self.selected]
        linger = lingering[:max(0, slots - len(keep))]
        add = candidates[:max(0, slots - len(keep) - len(linger))]
        shown = [i for i in self.panes if i in keep or i in linger] + add
        self.columns = columns
        overflow = [i for i in running if i not in shown]
        return shown, overflow

    def flush(self) -> None:
        session = self.session
        live = session.live
        if self.timed and not self._fed and 0 <= live.clock() - self._numbers_at < NUMBERS_EVERY:
            return  # nothing came since the last flush, and the clocks are not due: no work at all
        self._fed = False
        self.query_one(RunBar).show(session, timed=self.timed)
        shown, overflow = self.plan()
        grid = self.query_one("#panes", Grid)
        grid.styles.grid_size_columns = self.columns
        leaving = [i for i in self.panes if i not in shown]
        if self.selected in leaving:
            # The selection moves to a pane that stays (or the next new one), never into the list.
            staying = [i for i, p in self.panes.items() if i not in leaving and p.is_mounted]
            self.select(staying[0] if staying else None)
        for trial_id in leaving:
            pane = self.panes.pop(trial_id)
            if pane.is_attached:
                pane.remove()
            live.forget(trial_id)
        new = [i for i in shown if i not in self.panes]
        # The panes' count changes the room left for the list, so a changed plan is planned again
        # on the next flush (it settles in two or three).
        self._fed = self._fed or bool(new or leaving)
        for trial_id in new:
            self.panes[trial_id] = TrialPane(trial_id)
        self._sync_panes(shown)
        if new:
            self.run_worker(self._mount([self.panes[i] for i in new], shown), exit_on_error=False)
        self._show_overflow(overflow)
        self._show_empty(bool(shown))

    async def _mount(self, panes: list[TrialPane], shown: list[int]) -> None:
        await self.query_one("#panes", Grid).mount_all(panes)
        live = self.session.live
        for pane in panes:
            trial = live.trials.get(pane.trial_id)
            # Opened mid-trial (attached late, or pinned from the list): its start is in the store.
            if trial is not None and ((trial.events and trial.events[0][0] > 1)
                                      or (not trial.events and trial.meter.get("events"))):
                pane.seeding = True
                self.run_worker(self._seed(pane), exit_on_error=False)
        self._sync_panes(shown, numbers=True)
        if self.selected is None:
            first = next((i for i, p in self.panes.items() if p.is_mounted), None)
            if first is not None:
                self.select(first)

    def _sync_panes(self, shown: list[int], numbers: bool = False) -> None:
        live = self.session.live
        now = live.clock()
        if numbers or not self.timed or not 0 <= now - self._numbers_at < NUMBERS_EVERY:
            numbers, self._numbers_at = True, now
        for trial_id in shown:
            pane = self.panes.get(trial_id)
            if pane is not None and not pane.seeding and pane.is_mounted and trial_id in live.trials:
                pane.sync(live.trials[trial_id], now, meters=numbers or pane._status is None)

    async def _seed(self, pane: TrialPane) -> None:
        try:
            rows = await self.session.store.call(tail_events, pane.trial_id, SEED_EVENTS)
            pane.seed(rows)
        finally:
            pane.seeding = False
        self._sync_panes([pane.trial_id], numbers=True)

    def _show_overflow(self, overflow: list[int]) -> None:
        if overflow == self._listed and time.monotonic() - self._list_at < LIST_EVERY:
            return  # same trials: their numbers can wait for the next second
        self._listed, self._list_at = list(overflow), time.monotonic()
        live = self.session.live
        rows = [live.trials[i].meter for i in overflow]  # read only: no copies of a thousand meters
        title = self.query_one("#overflow-title", Static)
        table = self.query_one("#overflow", TrialTable)
        title.display = table.display = bool(rows)
        text = f"{len(rows)} more running · enter shows one in a pane"
        if rows and text != self._overflow_title:
            self._overflow_title = text
            title.update(text, layout=False)  # one fixed line: no re-layout of the screen
        table.sync(rows, visible_only=True)

    def _show_empty(self, have_panes: bool) -> None:
        empty = self.query_one("#live-empty", Static)
        empty.display = not have_panes
        if have_panes:
            return
        session = self.session
        if not session.live_mode:
            text = ("No runner attached: this store is shown as it is.\n"
                    "Start a run with [b]agentmeter run SUITE[/], or watch one with [b]agentmeter attach[/].")
        elif session.live.ended == "lost":
            text = "The connection to the runner was lost. [b]agentmeter attach[/] reconnects."
        elif session.live.ended:
            text = f"The schedule {session.live.ended}. [b]g[/] grid · [b]r[/] review · [b]t[/] report"
        elif not session.live.connected:
            text = "Connecting to the runner…"
        else:
            text = "Nothing running right now" + (" (paused)" if session.live.progress.get("paused") else "") + "."
        empty.update(text)

    # -- actions ---------------------------------------------------------------------------------

    def select(self, trial_id: int | None) -> None:
        """Make ``trial_id``'s pane the one the keys act on (a border change, not a focus change)."""
        old = self.panes.get(self.selected) if self.selected is not None else None
        self.selected = trial_id if trial_id in self.panes else None
        new = self.panes.get(self.selected) if self.selected is not None else None
        # Only the pane's own border depends on -selected (styles/live.tcss), so only the two
        # panes are restyled, not their subtrees: set_class's default restyles every widget
        # inside (the transcript's component styles most of all), which under a flood of output
        # was the bulk of a key's time.
        changed = []
        for pane, on in ((old, False), (new, True)):
            if pane is not None and pane.has_class("-selected") != on:
                pane.set_class(on, "-selected", update=False)
                changed.append(pane)
        if changed:
            self.app.stylesheet.update_nodes(changed, animate=True)

    def selected_trial(self) -> int | None:
        """The trial keys act on: the highlighted row when the list has focus, else the selected pane."""
        if isinstance(self.focused, TrialTable):
            return self.focused.current_id
        return self.selected

    def pin(self, trial_id: int) -> None:
        """Show ``trial_id`` in a pane (evicting the newest unpinned one if full) and select it."""
        if trial_id not in self.pinned:
            self.pinned.insert(0, trial_id)
        self.flush()
        self.call_after_refresh(self._select_pinned, trial_id)

    def _select_pinned(self, trial_id: int) -> None:
        if trial_id in self.panes:
            self.select(trial_id)
            if self.focused is not None:
                self.set_focus(None)  # keys go to the panes again

    def on_click(self, event) -> None:
        widget = event.widget
        while widget is not None and not isinstance(widget, TrialPane):
            widget = widget.parent
        if widget is not None:
            self.select(widget.trial_id)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "overflow" and event.row_key.value is not None:
            self.pin(int(event.row_key.value))

    def action_select_pane(self, step: int | str) -> None:
        panes = list(self.panes)
        if not panes:
            return
        delta = {"down": self.columns, "up": -self.columns}.get(step, step) if isinstance(step, str) else step
        current = panes.index(self.selected) if self.selected in panes else -1
        self.select(panes[max(0, min(len(panes) - 1, current + int(delta)))])

    def action_fleet(self) -> None:
        self.app.push_screen(FleetScreen())

    def action_maximize(self) -> None:
        pane = self.panes.get(self.selected) if self.selected is not None else None
        if pane is not None:
            self.maximize(pane)

    def action_minimize(self) -> None:
        self.minimize()

    def _running_selected(self):
        """The selected trial if it still runs; else say what to do and return None."""
        trial_id = self.selected_trial()
        trial = self.session.live.trials.get(trial_id) if trial_id is not None else None
        if trial is not None and trial.finished:  # its pane lingers a moment after it ends
            reason = trial.meter.get("reason")
            self.notify(f"Trial #{trial.id} has already ended: {trial.meter.get('status')}"
                        + (f" ({reason})." if reason else "."), severity="warning")
            return None
        if trial is None:
            self.notify("First pick a running trial's pane (arrow keys).", severity="warning")
            return None
        return trial

    def action_kill(self) -> None:
        trial = self._running_selected()
        if trial is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._kill(trial.id), exit_on_error=False)

        self.app.push_screen(ConfirmDialog(f"Kill trial #{trial.id}?", fmt.trial_title(trial.meter) +
                                           "\nIts transcript, tokens and cost so far are kept; the reason "
                                           "recorded is 'operator'.", yes="Kill", trial_id=trial.id), answered)

    async def _kill(self, trial_id: int) -> None:
        try:
            await self.session.request("kill", trial=trial_id, reason="operator")
        except Exception as exc:
            if "not running" in str(exc):  # it ended between the yes and the runner: not a failure
                self.notify(f"Trial #{trial_id} had already ended; nothing was killed.", severity="warning")
            else:
                self.notify(f"Kill failed: {exc}", severity="error")
        else:
            self.notify(f"Killing trial #{trial_id}…")

    def action_budget(self) -> None:
        trial = self._running_selected()
        if trial is None:
            return

        def answered(limits: dict | None) -> None:
            if limits:
                self.run_worker(self._raise(trial.id, limits), exit_on_error=False)  # a raise ends the hold
            elif dialog.ended is None:
                self.run_worker(self._hold(dialog, 0), exit_on_error=False)  # cancelled: release it now

        dialog = BudgetDialog(f"Raise the budget of trial #{trial.id}", trial.meter.get("budget") or {},
                              trial_id=trial.id)
        self.app.push_screen(dialog, answered)
        # Hold its budget kill while the figure is typed: a trial at 98 % must not die meanwhile.
        self.run_worker(self._hold(dialog, HOLD_MAX), exit_on_error=False)

    async def _hold(self, dialog: BudgetDialog, seconds: float) -> None:
        assert dialog.trial_id is not None
        try:
            reply = await self.session.hold_budget(dialog.trial_id, seconds)
        except Exception as exc:
            if seconds and dialog.is_attached:
                dialog.hold_for(None, str(exc))
            return
        if seconds and dialog.is_attached:
            dialog.hold_for(reply.get("held"))

    def action_budget_all(self) -> None:
        def answered(limits: dict | None) -> None:
            if limits:
                self.run_worker(self._raise(None, limits), exit_on_error=False)

        self.app.push_screen(BudgetDialog("Raise the budgets of every trial (running and to come)", {}), answered)

    async def _raise(self, trial_id: int | None, limits: dict) -> None:
        scope = {"trial": trial_id} if trial_id is not None else {}  # no trial: every trial, and the defaults
        try:
            reply = await self.session.request("budget", **scope, **limits)
        except Exception as exc:
            self.notify(f"Budget change failed: {exc}", severity="error")
            return
        trial = self.session.live.trials.get(trial_id) if trial_id is not None else None
        if trial is not None and reply.get("budget"):
            trial.meter["budget"] = reply["budget"]
        who = f"Trial #{trial_id}" if trial_id is not None else "Every trial"
        self.notify(f"{who}: budget now " + fmt.limits(limits))
