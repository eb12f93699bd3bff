"""The money keys: raise the run's cap, rerun trials, a cell's budget, pause a model or a CLI.

:class:`MoneyKeys` gives a screen the actions (the grid, live, cell and review screens bind
the keys that fit them); :class:`RerunDialog` and :class:`CapDialog` are their dialogs. Every
request goes to the runner's control socket (ops ``cap``, ``rerun``, ``budget``, ``pause``,
``resume``). A rerun takes the command line's own path (``core.run.launch.request_rerun``):
the running runner queues it, and on a finished store a runner is started for it, which the
TUI then follows.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any, Literal

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Label, Static

from ...core.run.launch import request_rerun
from ...core.vocab import FINAL_STATUSES
from .. import format as fmt
from ..widgets.money import cap_text, paused_scopes
from ..host import host
from .base import SessionScreen
from .dialogs import BudgetDialog, ConfirmDialog

if TYPE_CHECKING:
    from ...core.run.control import Answer
    from ..grid_state import Config, TrialSummary
    from ..session import UiSession

RERUN_STATUSES = ("infra-invalid", "errored", "killed", "failed", "passed")
RERUN_DEFAULT = ("infra-invalid", "errored", "killed")  # what went wrong, not what the agent did


def latest_statuses(trials: list[TrialSummary]) -> Counter[str]:
    """How many of a cell's (task, trial index) places end in each status, counting the latest
    attempt only: what ``rerun`` matches (``core.run.rerun``)."""
    latest: dict[tuple[str, int], TrialSummary] = {}
    for trial in sorted(trials, key=lambda t: t.id):
        latest[(trial.task, trial.trial)] = trial
    return Counter(t.status for t in latest.values() if t.status in FINAL_STATUSES)


class RerunDialog(ModalScreen[list[str] | None]):
    """Which statuses of a cell's latest trials to rerun, with how many trials that is."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="rerun-cancel")]

    def __init__(self, title: str, counts: Counter[str]) -> None:
        super().__init__(classes="dialog")
        self.title_text, self.counts = title, counts

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static("New attempts are appended; nothing is overwritten. The report then counts the latest "
                         "completed attempt.", classes="dialog-detail")
            for status in RERUN_STATUSES:
                yield Checkbox(f"{status} ({self.counts.get(status, 0)})", status in RERUN_DEFAULT,
                               id=f"rerun-{status}")
            yield Static("", id="rerun-count", classes="dialog-hint")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Rerun (enter)", id="apply", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self._count()
        # enter reruns what is ticked (the usual statuses); shift+tab reaches the checkboxes
        apply = self.query_one("#apply", Button)
        (self.query_one(Checkbox) if apply.disabled else apply).focus()

    def chosen(self) -> list[str]:
        return [s for s in RERUN_STATUSES if self.query_one(f"#rerun-{s}", Checkbox).value]

    def _count(self) -> None:
        n = sum(self.counts.get(s, 0) for s in self.chosen())
        self.query_one("#rerun-count", Static).update(f"{n} trial(s) will get a new attempt")
        self.query_one("#apply", Button).disabled = n == 0

    def on_checkbox_changed(self, _event: Checkbox.Changed) -> None:
        self._count()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.chosen() if event.button.id == "apply" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class CapDialog(BudgetDialog):
    """A new cap for the whole run (op ``cap``); blank fields keep their value. USD comes
    first (``$``: typing ``20`` means twenty dollars); ``ctrl+r`` (or its button) removes the
    cap in both measures: it answers ``{"clear": ["usd", "tokens"]}``."""

    BINDINGS = [*BudgetDialog.BINDINGS, Binding("ctrl+r", "clear_cap", "Remove cap", id="cap-clear")]
    FIELDS = (("usd", "USD"), ("tokens", "tokens"))
    APPLY = "Set cap"

    def more_buttons(self) -> ComposeResult:
        button = Button("Remove cap (ctrl+r)", id="clear", variant="warning")
        button.disabled = all(self.budget.get(key) is None for key, _ in self.FIELDS)  # nothing to remove
        yield button

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "clear":
            self.action_clear_cap()
        else:
            super().on_button_pressed(event)

    def action_clear_cap(self) -> None:
        if self.query_one("#clear", Button).disabled:
            self.query_one("#budget-error", Static).update("The run has no cap to remove.")
            return
        self.dismiss({"clear": [key for key, _ in self.FIELDS]})


def _runner_gone(session: UiSession) -> bool:
    return not session.live_mode or bool(session.live.ended)


class MoneyKeys(SessionScreen):
    """A session screen with the actions of the money keys (the screens that have them bind them)."""

    def _need_runner(self, what: str) -> bool:
        """True when a runner is attached; otherwise says so (and why) and returns False."""
        if _runner_gone(self.session):
            self.notify(f"No runner is attached: {what} needs a running one. Start it with `agentmeter run` "
                        "(or R reruns trials, which starts one).", severity="warning")
            return False
        return True

    async def _send(self, op: str, done: str, **fields: Any) -> Answer | None:
        try:
            reply = await self.session.request(op, **fields)
        except Exception as exc:
            self.notify(f"{op} failed: {exc}", severity="error")
            return None
        self.notify(done)
        return reply

    # -- caps ----------------------------------------------------------------------------------

    def action_raise_cap(self) -> None:
        if not self._need_runner("changing a cap"):
            return
        caps = self.session.live.progress.get("caps") or []
        run = next((row for row in caps if row["scope"] == "run"), {})
        detail = "\n".join(cap_text(row) for row in caps) or "The run has no cap yet."
        self.app.push_screen(CapDialog("The run's cap (a reached cap holds the schedule; raising it resumes)",
                                       {"usd": run.get("usd"), "tokens": run.get("tokens")}, detail=detail),
                             self._cap_answered)

    def _cap_answered(self, limits: dict | None) -> None:
        if limits:
            said = "Run cap removed: trials it held back start again." if "clear" in limits else \
                f"Run cap now {fmt.limits(limits)}."
            self.run_worker(self._send("cap", said, scope="run", **limits),
                            exit_on_error=False)

    # -- one cell's budget, a model's or a CLI's pause -------------------------------------------

    def money_config(self) -> Config | None:
        """The (model, CLI) the keys act on (override)."""
        return None

    def action_cell_budget(self) -> None:
        config = self.money_config()
        if config is None or not self._need_runner("a cell's budget"):
            return
        model, cli = config

        def answered(limits: dict | None) -> None:
            if limits:
                self.run_worker(self._send("budget", f"{model} × {cli}: every trial's budget now {fmt.limits(limits)}.",
                                           model=model, cli=cli, **limits), exit_on_error=False)

        self.app.push_screen(BudgetDialog(f"Budget of every trial of {model} × {cli} (running and to come)", {}),
                             answered)

    async def action_pause_scope(self, kind: str) -> None:
        config = self.money_config()
        if config is None or not self._need_runner(f"pausing a {kind}"):
            return
        name = config[0] if kind == "model" else config[1]
        models, clis = paused_scopes(self.session)
        resume = name in (models if kind == "model" else clis)
        op = "resume" if resume else "pause"
        reply = await self._send(op, f"{kind} {name}: " + ("resumed." if resume else
                                                           "paused; its running trials go on, none starts."),
                                 **{kind: name})
        if reply is not None:  # the feed sends progress with its next news; show the new state now
            key: Literal["paused_models", "paused_clis"] = "paused_models" if kind == "model" else "paused_clis"
            names = set(self.session.live.progress.get(key) or ())
            (names.discard if resume else names.add)(name)
            self.session.live.progress[key] = sorted(names)
            host(self.app).feed_signal.publish(None)

    # -- rerun -----------------------------------------------------------------------------------

    def action_rerun_cell(self) -> None:
        config = self.money_config()
        if config is None:
            return
        model, cli = config
        counts = latest_statuses(self.session.grid.cell_trials(config))

        def answered(statuses: list[str] | None) -> None:
            if statuses:
                self.rerun({"statuses": statuses, "model": model, "cli": cli})

        self.app.push_screen(RerunDialog(f"Rerun trials of {model} × {cli}", counts), answered)

    def rerun_trial(self, trial: TrialSummary | None) -> None:
        """Ask, then rerun one finished trial (its cell and trial index) as a new attempt."""
        if trial is None or trial.status not in FINAL_STATUSES:
            self.notify("Rerun takes a finished trial; this one has not ended.", severity="warning")
            return
        request = {"statuses": [trial.status], "task": trial.task, "model": trial.model, "cli": trial.cli,
                   "trial_index": trial.trial}

        def answered(yes: bool | None) -> None:
            if yes:
                self.rerun(request)

        self.app.push_screen(ConfirmDialog(
            f"Rerun trial #{trial.id}?",
            f"Appends a new attempt of task {escape(trial.task)} (trial {trial.trial}) for "
            f"{escape(trial.model)} × {escape(trial.cli)}; nothing is overwritten.", yes="Rerun", danger=False),
            answered)

    def rerun(self, fields: dict[str, Any]) -> None:
        self.run_worker(self._rerun({"op": "rerun", **fields}), exit_on_error=False)

    async def _rerun(self, request: dict[str, Any]) -> None:
        told: list[str] = []
        outcome = await asyncio.to_thread(request_rerun, self.session.db, request, None, told.append)
        if outcome.code != 0:
            self.notify(" ".join([outcome.message, *told]), severity="error")
            return
        if outcome.added == 0:
            self.notify("Nothing to rerun: no matching trial is the latest of its cell (or it is queued already).",
                        severity="warning")
            return
        self.notify(outcome.message)
        if outcome.started:
            host(self.app).attach_runner()
