"""Provides the modal dialogs: confirm (kill), a note, a budget raise.

Each is a ``ModalScreen[T]`` that dismisses with its typed answer (``None`` = cancelled),
so callers read ``await push_screen_wait(...)`` or pass a callback.
"""

from __future__ import annotations

import math

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from ...core.vocab import MAX_BUDGET_TOKENS, MAX_BUDGET_USD, MAX_BUDGET_WALL

BUDGET_MOST = {"tokens": MAX_BUDGET_TOKENS, "usd": MAX_BUDGET_USD, "wall_seconds": MAX_BUDGET_WALL}


class ConfirmDialog(ModalScreen[bool]):
    BINDINGS = [Binding("y", "answer(True)", "Yes", id="confirm-yes"),
                Binding("n,escape", "answer(False)", "No", id="confirm-no")]

    def __init__(self, question: str, detail: str = "", yes: str = "Yes", danger: bool = True) -> None:
        super().__init__(classes="dialog")
        self.question, self.detail, self.yes, self.danger = question, detail, yes, danger

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(self.question, classes="dialog-title")
            if self.detail:
                yield Static(self.detail, classes="dialog-detail")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error" if self.danger else "primary")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
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


class BudgetDialog(ModalScreen[dict | None]):
    """New limits for one trial (or every running trial); blank fields keep their value."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="budget-cancel")]

    def __init__(self, title: str, budget: dict) -> None:
        super().__init__(classes="dialog")
        self.title_text, self.budget = title, budget

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(self.title_text, classes="dialog-title")
            with Grid(classes="budget-grid"):
                for key, label in (("tokens", "tokens"), ("usd", "USD"), ("wall_seconds", "seconds")):
                    yield Label(label)
                    current = self.budget.get(key)
                    yield Input(placeholder="no limit" if current is None else f"now {current:g}",
                                id=f"budget-{key}", type="number")
            yield Static("", id="budget-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Raise (enter)", id="apply", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#budget-tokens", Input).focus()

    def _collect(self) -> dict | None:
        limits = {}
        for key in ("tokens", "usd", "wall_seconds"):
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
        limits = self._collect()
        if limits is not None:
            self.dismiss(limits or None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self._submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
