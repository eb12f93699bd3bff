"""What the rest of the run engine knows of a trial: its plan (:class:`TrialPlan`) and the
face a running trial shows the sink, the run context and the final row (:class:`TrialView`).

A leaf: :mod:`.trial` implements the view; :mod:`.context`, :mod:`.feed`, :mod:`.record`,
:mod:`.placement` and :mod:`.scheduler` name it without importing the trial's machinery, so no
module of the engine imports one that imports it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from ..proxy.calls import CallSink

if TYPE_CHECKING:
    from ..harnesses.base import HarnessAdapter, StreamParser
    from ..proxy.calls import Route
    from ..suites.suite import Configuration, Suite, Task
    from ..suites.budget import Budget
    from ..usage import TokenUsage
    from ..vocab import TrialStatus


@dataclass
class TrialPlan:
    task: Task
    config: Configuration
    config_id: int
    trial_index: int
    attempt: int = 0

    @property
    def cell(self) -> tuple[str, str, int]:
        return (self.task.id, self.config.key, self.trial_index)


class RunFacts(Protocol):
    """What a trial's final row needs of its run (read-only, so that the run context, whose
    attributes are wider or settable, fits)."""

    @property
    def run_id(self) -> int | None: ...

    @property
    def suite(self) -> Suite: ...


class HoldView(Protocol):
    """A trial's budget hold as its meter reads it (:class:`~.budget_hold.BudgetHold`)."""

    def remaining(self) -> float | None: ...


class LifecycleView(Protocol):
    """A trial's lifecycle as its meter reads it (:class:`~.lifecycle.TrialLifecycle`, moved by
    the trial alone). Not imported: sandboxes import this module through placement, and the
    lifecycle's outcome names the verifiers' verdict, which sandboxes may not import."""

    @property
    def status(self) -> TrialStatus: ...

    @property
    def reason(self) -> str | None: ...

    def elapsed(self) -> float | None: ...


class TrialView(CallSink, Protocol):
    """A trial as the sink, the run context and the final row read it (:class:`~.trial.TrialRun`);
    the context routes its model calls through the proxy to it (a ``CallSink``)."""

    id: int | None
    plan: TrialPlan
    adapter: HarnessAdapter
    parser: StreamParser
    token: str
    usage: TokenUsage
    cost: Decimal | None
    turns: int
    tool_calls: int
    flags: set[str]
    scripted_key: str | None
    scripted_url: str | None
    proxy_route: Route | None
    budget: Budget
    seq: int  # the last event's seq
    node: str | None

    @property
    def lifecycle(self) -> LifecycleView: ...

    @property
    def hold(self) -> HoldView: ...

    @property
    def ctx(self) -> RunFacts:
        """Read-only here: a trial's own ``ctx`` is the whole :class:`~.context.RunContext`."""

    def note(self, text: str, kind: Any = ...) -> None:
        """A runner-side line in its transcript (an ``EventKind``, STATUS unless given)."""

    def meter(self) -> Mapping[str, Any]:
        """A :class:`~.control.Meter` (not named here: sandboxes import this module through
        placement, and the control socket is none of theirs)."""
