"""A trial's states and ends, in one place: which status may follow which (:data:`TRANSITIONS`),
the :class:`TrialLifecycle` that owns a trial's status, its end reason and the kill asked of it,
and how it ended (:class:`TrialOutcome`, :func:`killed_outcome`).

A trial is made ``queued``; its row is made ``starting``; it is ``running`` once its agent is
started and ``verifying`` while the task's verifier judges what the agent left. It may end from
any of the three (a task unfit for the CLI, a kill, the agent's error, a failure on our side),
in one of the final statuses, and nothing follows a final status. A status that skips or goes
back is a bug on our side, refused here rather than written to the trial's row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from ..vocab import ACTIVE_STATUSES, FINAL_STATUSES, KillReason, TrialStatus

if TYPE_CHECKING:
    from ..verifiers.base import VerifierResult

TRANSITIONS: Mapping[TrialStatus, frozenset[TrialStatus]] = {
    TrialStatus.QUEUED: frozenset({TrialStatus.STARTING}),  # the scheduler made its row
    TrialStatus.STARTING: frozenset({TrialStatus.RUNNING}) | FINAL_STATUSES,
    TrialStatus.RUNNING: frozenset({TrialStatus.VERIFYING}) | FINAL_STATUSES,
    TrialStatus.VERIFYING: FINAL_STATUSES,
    **{status: frozenset() for status in FINAL_STATUSES},
}


class IllegalTransition(RuntimeError):
    """A status change no trial makes (a bug on our side): the trial's row is not changed."""


class TrialOutcome(NamedTuple):
    """How a trial ended, as its final row will say: its status, why (None for a pass), and the
    verifier's verdict when one was reached."""

    status: TrialStatus
    reason: str | None
    verdict: VerifierResult | None = None


def killed_outcome(reason: KillReason) -> TrialOutcome:
    """A killed trial's outcome: a counted kill, or infra-invalid when the kill was our side's
    (a failure under it, the run stopping), so the cell runs again."""
    infra = reason.infra_reason
    return TrialOutcome(TrialStatus.KILLED, reason.code) if infra is None else \
        TrialOutcome(TrialStatus.INFRA_INVALID, infra)


class TrialLifecycle:
    """One trial's status, the reason it ended with, and the kill asked of it (the first one
    asked counts: the operator's kill after a budget's does not rename it)."""

    def __init__(self) -> None:
        self._status = TrialStatus.QUEUED
        self._reason: str | None = None
        self._kill_reason: KillReason | None = None
        self._kill = asyncio.Event()  # set once a kill is asked: the agent's or verifier's wait ends
        self.made = time.monotonic()  # when the trial was made (its queue time counts in its elapsed)

    @property
    def status(self) -> TrialStatus:
        return self._status

    @property
    def reason(self) -> str | None:
        """Why it ended (None while it runs, and for a pass)."""
        return self._reason

    @property
    def kill_reason(self) -> KillReason | None:
        return self._kill_reason

    def elapsed(self) -> float | None:
        """Seconds since the trial was made while it is active; None before it starts and after."""
        return time.monotonic() - self.made if self._status in ACTIVE_STATUSES else None

    def move(self, status: TrialStatus) -> None:
        """Go to ``status``; :class:`IllegalTransition` if no trial goes there from here."""
        if status not in TRANSITIONS[self._status]:
            allowed = ", ".join(sorted(TRANSITIONS[self._status])) or "none: it has ended"
            raise IllegalTransition(f"a trial's status cannot go from {self._status} to {status} "
                                    f"(allowed: {allowed})")
        self._status = status

    def end(self, outcome: TrialOutcome) -> None:
        """The trial ends with ``outcome``: its final status and reason."""
        if not outcome.status.is_final:
            raise IllegalTransition(f"a trial cannot end {outcome.status}: not a final status")
        self.move(outcome.status)
        self._reason = outcome.reason

    def force_end(self, outcome: TrialOutcome) -> None:
        """End with ``outcome`` whatever the status (after :meth:`end` refused it: a bug on our
        side), so that meters, the feed and the forecast see the trial as ended."""
        self._status, self._reason = outcome.status, outcome.reason

    def ask_kill(self, reason: KillReason) -> bool:
        """Ask the trial to be killed for ``reason``; False when a kill was asked before or the
        trial has ended (the first reason stays)."""
        if self._kill_reason is not None or self._status.is_final:
            return False
        self._kill_reason = reason
        self._kill.set()
        return True

    async def kill_asked(self) -> None:
        """Return once a kill is asked (at once if one was)."""
        await self._kill.wait()

    def killed(self) -> TrialOutcome:
        """The outcome of the kill that was asked (:func:`killed_outcome`)."""
        if self._kill_reason is None:
            raise IllegalTransition("the trial was not asked to be killed")
        return killed_outcome(self._kill_reason)
