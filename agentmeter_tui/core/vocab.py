"""The vocabulary shared by the store, the scheduler, the adapters and the UI:
trial states, event kinds, and the parsed event an adapter produces from one output line.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal, TypeGuard, get_args

from .usage import TokenUsage

# A task's difficulty (task.toml's [task] tier; a report's columns per tier), in that order.
Tier = Literal["easy", "medium", "hard"]
TIERS: tuple[str, ...] = get_args(Tier)


def is_tier(value: str) -> TypeGuard[Tier]:
    return value in TIERS


class TrialStatus(StrEnum):
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    VERIFYING = "verifying"
    PASSED = "passed"
    FAILED = "failed"
    KILLED = "killed"
    ERRORED = "errored"
    INFRA_INVALID = "infra-invalid"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATUSES


FINAL_STATUSES = frozenset(
    {TrialStatus.PASSED, TrialStatus.FAILED, TrialStatus.KILLED, TrialStatus.ERRORED, TrialStatus.INFRA_INVALID}
)
ACTIVE_STATUSES = frozenset({TrialStatus.STARTING, TrialStatus.RUNNING, TrialStatus.VERIFYING})
# A cell is done once it has one of these; infra-invalid attempts are retried and not counted.
COUNTABLE_STATUSES = frozenset({TrialStatus.PASSED, TrialStatus.FAILED, TrialStatus.KILLED, TrialStatus.ERRORED})


# What a reviewer may score: a result the agent produced. An infra-invalid attempt is the
# infrastructure's (it runs again, and no report counts it), so it is not offered nor scored.
REVIEWABLE_STATUSES = COUNTABLE_STATUSES


def unreviewable(trial_id: int, status: str | None) -> str | None:
    """Why trial ``trial_id`` in ``status`` may not be scored (None: it may)."""
    if status in REVIEWABLE_STATUSES:
        return None
    if status == TrialStatus.INFRA_INVALID:
        return (f"trial {trial_id} ended infra-invalid (the infrastructure's, not the agent's): it runs again "
                "and no report counts it; score its rerun")
    return f"trial {trial_id} has not finished ({status}): score it once it has"


def counts_as_done(status: str | None) -> bool:
    """Whether a trial in ``status`` is done, as every "done" count says it (the run's progress,
    the grid's cells and header): it ended and counts. An infra-invalid attempt is not done: it
    runs again (retried, or on the next `agentmeter run`)."""
    return status in COUNTABLE_STATUSES


class EventKind(StrEnum):
    SYSTEM = "system"  # init, session ids, model announcements
    ASSISTANT = "assistant"  # assistant text
    REASONING = "reasoning"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    USAGE = "usage"
    ERROR = "error"
    RAW = "raw"  # a line we could not parse, kept verbatim
    STATUS = "status"  # written by the runner: state changes, kills, budget crossings, flags


@dataclass(slots=True)
class ParsedEvent:
    """One normalized transcript item as an adapter sees it.

    ``usage`` is always a *delta* that the caller may add to its running total: adapters whose
    CLI prints cumulative totals subtract what they already reported, so a meter never
    double counts. ``reported_cost_usd`` is the CLI's own cumulative cost figure, when it has one.
    """

    kind: EventKind
    text: str = ""
    tool_name: str | None = None
    tool_key: str | None = None  # name + canonical arguments, for the thrash detector
    is_error: bool = False
    usage: TokenUsage | None = None
    turns: int = 0  # model calls completed by this event
    model: str | None = None
    reported_cost_usd: Decimal | None = None


@dataclass(frozen=True, slots=True)
class KillReason:
    """Why a trial was stopped: ``operator``, ``budget:time|tokens|usd``, ``thrash``, ``shutdown``,
    ``infra`` (our side failed under it: the trial ends infra-invalid, with ``detail`` as its reason)."""

    code: str
    detail: str = ""

    def __str__(self) -> str:
        return self.code if not self.detail else f"{self.code} ({self.detail})"

    @property
    def infra_reason(self) -> str | None:
        """The infra-invalid reason a kill for this reason gives, or None when the kill counts
        (a budget, the operator, thrash): our side failing under a trial, or the run being
        stopped, say nothing about the agent, so the trial runs again."""
        if self.code == "infra":
            return f"infra: {self.detail}"
        if self.code == "shutdown":
            return INTERRUPTED_STOP
        return None


# The largest limits a budget takes: finite, and small enough to travel in JSON (the feed
# sends budgets to clients; an integer past 2**63 cannot be encoded, past 2**53 not read back
# exactly by every client). A year of wall time and a billion dollars are past any trial.
MAX_BUDGET_TOKENS = 2**53
MAX_BUDGET_WALL = 365 * 24 * 3600.0
MAX_BUDGET_USD = 1e9

# An interrupted trial (the run stopped, the runner lost) ends infra-invalid with one of these
# reasons; it runs again when the suite is run again, and does not use up the cell's retries.
INTERRUPTED = "infra: interrupted"
INTERRUPTED_STOP = f"{INTERRUPTED}: the run was stopped"
INTERRUPTED_LOST = f"{INTERRUPTED}: runner lost (restarted)"


def source_label(row: Any) -> str | None:
    """Where a stored trial came from, for the screens and the report: None for a trial run
    here; ``harbor``, ``atif``, ``session:CLI``, or ``record`` (``import-trials``)."""
    if not row.get("imported"):
        return None
    return row.get("source") or "record"
