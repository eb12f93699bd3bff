"""A trial's budget checks (:class:`BudgetWatch`, over the :class:`Spender` it watches) and
:class:`BudgetHold`: an operator's short hold on one trial's budget kill.

An operator who sees a trial near its limit opens the TUI's budget dialog to raise it; typing
a figure takes seconds, and the trial can cross its limit meanwhile. So opening the dialog
asks the runner (op ``hold``) to hold that trial's budget kill for at most ``HOLD_MAX``
seconds. While held, a budget kill is kept pending instead of carried out; when the hold ends
(a raise, a release, or its time running out) the trial's budgets are checked again against
the budget then in force. Only budget kills wait: the operator's, the thrash detector's and a
shutdown's go ahead at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

from ..vocab import KillReason

if TYPE_CHECKING:
    from ..suites.budget import Budget
    from ..usage import TokenUsage
    from ..vocab import TrialStatus

HOLD_MAX = 30.0  # seconds: long enough to type a figure, short enough to cap what a forgotten dialog costs


class BudgetHold:
    def __init__(self, on_end: Callable[[KillReason | None], None]):
        self.until: float | None = None  # monotonic time the hold ends
        self.pending: KillReason | None = None  # the budget kill it holds back, if one came
        self._timer: asyncio.TimerHandle | None = None
        self._on_end = on_end  # called with the pending kill (or None) when the hold ends

    @property
    def active(self) -> bool:
        return self.until is not None

    def remaining(self) -> float | None:
        return None if self.until is None else max(0.0, self.until - time.monotonic())

    def start(self, seconds: float) -> None:
        """Hold for ``seconds`` from now (0 < seconds <= HOLD_MAX; the socket refuses others)."""
        if self._timer is not None:
            self._timer.cancel()
        self.until = time.monotonic() + seconds
        self._timer = asyncio.get_running_loop().call_later(seconds, self.end)

    def defer(self, reason: KillReason) -> bool:
        """Keep ``reason`` pending if it is a budget kill and a hold is on; True if kept."""
        if self.until is None or not reason.code.startswith("budget:"):
            return False
        self.pending = self.pending or reason
        return True

    def end(self) -> None:
        if self.until is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self.until, self._timer = None, None
        pending, self.pending = self.pending, None
        self._on_end(pending)


class Spender(Protocol):
    """What a :class:`BudgetWatch` reads of its trial (:class:`~.trial.TrialRun`)."""

    @property
    def budget(self) -> Budget: ...

    @property
    def usage(self) -> TokenUsage: ...

    @property
    def cost(self) -> Decimal | None: ...

    @property
    def status(self) -> TrialStatus: ...

    def request_kill(self, reason: KillReason) -> None: ...

    def cap_reached(self) -> KillReason | None:
        """The run's, provider's or model's cap over the trial's model, if one is reached."""

    def hold_changed(self) -> None:
        """The hold started or ended: the live pane shows it."""


class BudgetWatch:
    """A trial's budget checks: tokens and USD as usage arrives, time against a deadline that
    moves with a raise (the wall timer, while the trial's clock runs), and the operator's hold."""

    def __init__(self, trial: Spender):
        self.trial = trial
        self.hold = BudgetHold(self._hold_ended)  # the operator's hold on its budget kill (TUI dialog)
        self._wall_from: float | None = None  # monotonic time the agent started (the time budget's zero)
        self._wall_timer: asyncio.TimerHandle | None = None

    def over(self) -> KillReason | None:
        """The budget or cap the trial has reached, if any."""
        trial = self.trial
        budget, usage, cost = trial.budget, trial.usage, trial.cost
        if budget.tokens is not None and usage.raw >= budget.tokens:
            return KillReason("budget:tokens", f"{usage.raw} >= {budget.tokens}")
        if budget.usd is not None and cost is not None and cost >= Decimal(str(budget.usd)):
            return KillReason("budget:usd", f"${cost:.4f} >= ${budget.usd}")
        return trial.cap_reached()

    def check(self) -> None:
        reason = self.over()
        if reason is not None:
            self.trial.request_kill(reason)

    def hold_for(self, seconds: float) -> None:
        """Hold the budget kill ``seconds`` (0: release it now)."""
        if seconds > 0:
            self.hold.start(seconds)
        else:
            self.hold.end()
        self.trial.hold_changed()

    def _hold_ended(self, pending: KillReason | None) -> None:
        self.trial.hold_changed()
        if pending is not None:
            self.check()
            self._wall_due()

    def start_clock(self) -> None:
        """The agent started: the time budget counts from now."""
        self._wall_from = time.monotonic()
        self._wall_due()

    def stop_clock(self) -> None:
        """The agent ended: no time budget left to enforce, and no timer left waiting for it."""
        self._wall_from = None
        self._cancel_wall_timer()

    def _cancel_wall_timer(self) -> None:
        if self._wall_timer is not None:
            self._wall_timer.cancel()
            self._wall_timer = None

    def _wall_due(self) -> None:
        """The time budget as it is now (a raise moves the deadline): kill, or check again then."""
        self._cancel_wall_timer()
        wall = self.trial.budget.wall_seconds
        if not wall or self._wall_from is None or self.trial.status.is_final:
            return
        left = wall - (time.monotonic() - self._wall_from)
        if left > 0:
            self._wall_timer = asyncio.get_running_loop().call_later(left, self._wall_due)
        else:
            self.trial.request_kill(KillReason("budget:time", f"{wall:g} s"))
