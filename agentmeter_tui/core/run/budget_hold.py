"""Provides :class:`BudgetHold`: an operator's short hold on one trial's budget kill.

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
from typing import TYPE_CHECKING

from ..vocab import KillReason, TrialStatus

if TYPE_CHECKING:
    from ..suites.budget import Budget
    from ..usage import TokenUsage
    from .context import RunContext
    from .trialview import TrialPlan

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


class BudgetChecks:
    """A trial's budget checks (part of :class:`~.trial.TrialRun`): tokens and USD as usage
    arrives, time against a deadline that moves with a raise, and the operator's hold."""

    budget: Budget
    usage: TokenUsage
    cost: Decimal | None
    status: TrialStatus
    hold: BudgetHold
    ctx: RunContext
    plan: TrialPlan
    _wall_from: float | None
    _wall_timer: asyncio.TimerHandle | None

    def request_kill(self, reason: KillReason) -> None:
        raise NotImplementedError

    def _over_budget(self) -> KillReason | None:
        budget = self.budget
        if budget.tokens is not None and self.usage.raw >= budget.tokens:
            return KillReason("budget:tokens", f"{self.usage.raw} >= {budget.tokens}")
        if budget.usd is not None and self.cost is not None and self.cost >= Decimal(str(budget.usd)):
            return KillReason("budget:usd", f"${self.cost:.4f} >= ${budget.usd}")
        return self.ctx.caps.reached(self.plan.config.model)  # the run's, provider's or model's cap

    def _check_budgets(self) -> None:
        reason = self._over_budget()
        if reason is not None:
            self.request_kill(reason)

    def hold_budget(self, seconds: float) -> None:
        """Hold the budget kill ``seconds`` (0: release it now)."""
        if seconds > 0:
            self.hold.start(seconds)
        else:
            self.hold.end()
        self.ctx.sink.trial_changed(self)  # type: ignore[arg-type]  # the pane shows the hold

    def _hold_ended(self, pending: KillReason | None) -> None:
        self.ctx.sink.trial_changed(self)  # type: ignore[arg-type]
        if pending is not None:
            self._check_budgets()
            self._wall_due()

    def _wall_due(self) -> None:
        """The time budget as it is now (a raise moves the deadline): kill, or check again then."""
        if self._wall_timer is not None:
            self._wall_timer.cancel()
            self._wall_timer = None
        wall = self.budget.wall_seconds
        if not wall or self._wall_from is None or self.status.is_final:
            return
        left = wall - (time.monotonic() - self._wall_from)
        if left > 0:
            self._wall_timer = asyncio.get_running_loop().call_later(left, self._wall_due)
        else:
            self.request_kill(KillReason("budget:time", f"{wall:g} s"))
