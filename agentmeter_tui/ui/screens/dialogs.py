"""Provides the modal dialogs: confirm (kill), a note, a budget raise.

Each is a ``ModalScreen[T]`` that dismisses with its typed answer (``None`` = cancelled),
so callers read ``await push_screen_wait(...)`` or pass a callback. A dialog about one trial
(kill, raise its budget) is bound to it: it follows the feed, and once that trial has ended
it says so and its action does nothing (no "trial is not running" from the runner).
"""

from __future__ import annotations

import math
import time
from typing import ClassVar, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from ...core.vocab import FINAL_STATUSES, MAX_BUDGET_TOKENS, MAX_BUDGET_USD, MAX_BUDGET_WALL
from .. import format as fmt
from ..host import host

BUDGET_MOST = {"tokens": MAX_BUDGET_TOKENS, "usd": MAX_BUDGET_USD, "wall_seconds": MAX_BUDGET_WALL}


R = TypeVar("R")


class TrialBound(ModalScreen[R]):
    """A dialog about trial ``trial_id`` (answering an ``R``): ``ended`` says how it ended once it has."""

    trial_id: int | None = None
    ended: str | None = None

    def watch_trial(self) -> None:
        if self.trial_id is not None:
            host(self.app).feed_signal.subscribe(self, self._check_trial, immediate=True)
            self._check_trial(None)

    def _check_trial(self, _summary: object) -> None:
        trial_id = self.trial_id
        if self.ended is not None or trial_id is None:
            return
        session = host(self.app).session
        live = session.live.trials.get(trial_id)
        meter = live.meter if live is not None else None
        stored = session.grid.trials.get(trial_id)
        if meter is not None and meter.get("status") in FINAL_STATUSES:
            status, reason = meter["status"], meter.get("reason")
        elif meter is None and stored is not None and stored.status in FINAL_STATUSES:
            status, reason = stored.status, stored.reason
        elif session.live.ended:
            status, reason = f"the run {session.live.ended}", None
        else:
            return
        self.ended = status + (f" ({reason})" if reason else "")
        self.trial_ended()

    def trial_ended(self) -> None:
        """Show that the trial has ended (override)."""


class ConfirmDialog(TrialBound[bool]):
    BINDINGS = [Binding("y", "answer(True)", "Yes", id="confirm-yes"),
                Binding("n,escape", "answer(False)", "No", id="confirm-no")]

    def __init__(self, question: str, detail: str = "", yes: str = "Yes", danger: bool = True,
                 trial_id: int | None = None) -> None:
        super().__init__(classes="dialog")
        self.question, self.detail, self.yes, self.danger = question, detail, yes, danger
        self.trial_id = trial_id  # the trial it asks about: a yes after it ended does nothing

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(self.question, classes="dialog-title")
            if self.detail:
                yield Static(self.detail, classes="dialog-detail")
            ended = Static("", id="dialog-ended", classes="dialog-error")
            ended.display = False  # shown only if its trial ends while the question is open
            yield ended
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error" if self.danger else "primary")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()
        self.watch_trial()

    def trial_ended(self) -> None:
        ended = self.query_one("#dialog-ended", Static)
        ended.update(f"Trial #{self.trial_id} has ended: {self.ended}. Nothing left to do here.")
        ended.display = True
        self.query_one("#yes", Button).disabled = True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        if value and self.ended is not None:
            self.notify(f"Trial #{self.trial_id} had already ended: {self.ended}.", severity="warning")
            value = False
        self.dismiss(value)


class NoteDialog(ModalScreen[str | None]):
    BINDINGS = [Binding("ctrl+s", "save", "Save", id="note-save", priority=True),
                Binding("escape", "cancel", "Cancel", id="note-cancel")]

    def __init__(self, title: str, text: str = "") -> None:
        super().__init__(classes="dialog")
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(self.title_text, classes="dialog-title")
            yield TextArea(self.text, id="note-text", soft_wrap=True, show_line_numbers=False)
            yield Static("ctrl+s save · esc cancel", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_save(self) -> None:
        text = self.query_one(TextArea).text.strip()
        self.dismiss(text or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class BudgetDialog(TrialBound[dict | None]):
    """New limits for one trial (or every running trial); blank fields keep their value.

    For one trial, its opener asks the runner to hold that trial's budget kill while the
    figure is typed (``hold_for`` shows for how long); a raise or a cancel ends the hold."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="budget-cancel")]
    # (limit, label) asked for, in order; a subclass asks for fewer (CapDialog)
    FIELDS: ClassVar[tuple[tuple[str, str], ...]] = (("tokens", "tokens"), ("usd", "USD"), ("wall_seconds", "seconds"))
    APPLY = "Raise"
    clock = staticmethod(time.monotonic)  # the hold's countdown (a test holds it still)

    def __init__(self, title: str, budget: dict, trial_id: int | None = None, detail: str = "") -> None:
        super().__init__(classes="dialog")
        self.title_text, self.budget, self.detail = title, budget, detail
        self.trial_id = trial_id
        self._held_until: float | None = None  # monotonic end of the runner's hold on its budget kill
        self._hold_error: str | None = None  # why the runner did not hold it

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(self.title_text, classes="dialog-title")
            if self.detail:
                yield Static(self.detail, classes="dialog-detail")
            with Grid(classes="budget-grid"):
                for key, label in self.FIELDS:
                    yield Label(label)
                    current = self.budget.get(key)
                    yield Input(placeholder="no limit" if current is None else f"now {fmt.limit(key, current)}",
                                id=f"budget-{key}", type="number")
            yield Static("", id="budget-hold", classes="dialog-hint")
            yield Static("", id="budget-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.APPLY} (enter)", id="apply", variant="primary")
                yield from self.more_buttons()
                yield Button("Cancel (esc)", id="cancel")

    def more_buttons(self) -> ComposeResult:
        """Buttons between apply and cancel (override)."""
        yield from ()

    def on_mount(self) -> None:
        self.query_one(f"#budget-{self.FIELDS[0][0]}", Input).focus()  # the first field asked for
        self.watch_trial()
        if self.trial_id is not None:
            self._show_hold()
            self.set_interval(1.0, self._show_hold)

    def hold_for(self, seconds: float | None, error: str | None = None) -> None:
        """The runner's answer to the hold (it can come before the dialog is drawn): held
        ``seconds``, or not (``error``)."""
        if seconds:
            self._held_until = self.clock() + seconds
        else:
            self._hold_error = error or "the runner did not hold it"
        if self.is_mounted:
            self._show_hold()

    def _show_hold(self) -> None:
        if self.ended is not None:
            return
        if self._hold_error is not None:
            text = f"[$warning]Its budget kill is not held ({escape(self._hold_error)}): be quick.[/]"
        elif self._held_until is None:
            text = "Asking the runner to hold its budget kill…"
        else:
            left = max(0, round(self._held_until - self.clock()))
            text = (f"Its budget kill is held for {left} s while you type" if left
                    else "[$warning]The hold is over: its budgets apply again.[/]")
        self.query_one("#budget-hold", Static).update(text)

    def trial_ended(self) -> None:
        self._held_until = None
        self.query_one("#budget-hold", Static).update("")
        self.query_one("#budget-error", Static).update(f"Trial #{self.trial_id} has ended: {self.ended}. "
                                                       "There is no budget left to raise.")
        self.query_one("#apply", Button).disabled = True

    def _collect(self) -> dict | None:
        limits = {}
        for key, _label in self.FIELDS:
            raw = self.query_one(f"#budget-{key}", Input).value.strip()
            if not raw:
                continue
            try:
                value = float(raw)
            except ValueError:
                value = -1
            most = BUDGET_MOST[key]  # what the runner takes (core/run/requests.py checks it again)
            if not math.isfinite(value) or value <= 0 or value > most:
                self.query_one("#budget-error", Static).update(f"{key}: a number above 0 and at most {most:g}, please")
                return None
            limits[key] = int(value) if key == "tokens" else value
        return limits

    def _submit(self) -> None:
        if self.ended is not None:
            self.dismiss(None)
            return
        limits = self._collect()
        if limits is not None:
            self.dismiss(limits or None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self._submit()
        elif event.button.id == "cancel":
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
