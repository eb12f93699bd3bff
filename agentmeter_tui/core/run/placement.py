"""Placement: which host's slot a trial runs in.

Every sandbox kind describes its hosts (the local machine, docker engines, ssh hosts) as
:class:`Host` objects with a number of slots. The scheduler asks :meth:`Placement.take`
for the next trial it may start: the first queued trial (in schedule order) whose provider
is under its concurrency limit and for which some up host that satisfies the task has a
free slot; the least loaded such host gets it, so trials spread over hosts. Per-host slots
and per-provider limits hold across all hosts. A sandbox marks a host down when it loses
it (its trials become infra-invalid and their retries go elsewhere) and up again when a
probe succeeds.

The slot reaches the sandbox through the trial's token (:meth:`bind`, :meth:`slot_for`),
so the sandbox interface keeps its shape.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..suites.suite import Suite
    from .trialview import TrialPlan


@dataclass
class Host:
    name: str
    slots: int
    labels: frozenset[str] = frozenset()
    up: bool = True
    busy: int = 0
    down_reason: str | None = None

    @property
    def free(self) -> int:
        return self.slots - self.busy if self.up else 0


@dataclass(frozen=True)
class Slot:
    host: str
    provider: str | None = None
    serial: int = field(default=0, compare=False)


def task_labels(plan: TrialPlan) -> frozenset[str]:
    """Host labels a task requires: ``[environment] host_labels = ["gpu"]`` in its task.toml."""
    return frozenset(plan.task.spec.environment.host_labels)


class Placement:
    def __init__(self, hosts: list[Host], provider_limits: dict[str, int] | None = None):
        if not hosts:
            raise ValueError("placement needs at least one host")
        self.hosts = {h.name: h for h in hosts}
        self.provider_limits = dict(provider_limits or {})
        self.provider_busy: Counter[str] = Counter()
        self._changed = asyncio.Event()
        self._by_token: dict[str, Slot] = {}
        self._serial = 0
        self.on_change: Callable[[Host], None] = lambda host: None
        self.give_up_after = 600.0
        self.on_give_up: Callable[[int], None] = lambda pending: None

    @classmethod
    def for_run(cls, sandbox: Any, suite: Suite) -> Placement:
        """The sandbox's own placement (its hosts) or one local host with the suite's concurrency;
        the suite's per-provider limits (``[providers.X] concurrency``) are added to it."""
        placement = getattr(sandbox, "placement", None)
        if placement is None:
            placement = cls([Host("local", max(1, min(suite.concurrency, sandbox.capacity())))])
        for name, provider in suite.spec.providers.items():
            limit = getattr(provider, "concurrency", None)
            if limit:
                placement.provider_limits[name] = int(limit)
        return placement

    # -- capacity -----------------------------------------------------------------------------

    def capacity(self) -> int:
        return sum(h.slots for h in self.hosts.values() if h.up) or 0

    def total_slots(self) -> int:
        return sum(h.slots for h in self.hosts.values())

    def snapshot(self) -> list[dict[str, Any]]:
        return [{"host": h.name, "slots": h.slots, "busy": h.busy, "up": h.up, "reason": h.down_reason}
                for h in self.hosts.values()]

    # -- taking and giving back slots ----------------------------------------------------------

    def _host_for(self, labels: frozenset[str]) -> Host | None:
        candidates = [h for h in self.hosts.values() if h.free > 0 and labels <= h.labels]
        if not candidates:
            return None
        return min(candidates, key=lambda h: (h.busy / h.slots, h.busy))

    def try_take(self, queue: list[TrialPlan], admit: Callable[[TrialPlan], bool] = lambda plan: True
                 ) -> tuple[TrialPlan, Slot] | None:
        for index, plan in enumerate(queue):
            if not admit(plan):  # the scheduler's say: a cap, a paused model or CLI
                continue
            provider = plan.config.model.provider
            limit = self.provider_limits.get(provider)
            if limit is not None and self.provider_busy[provider] >= limit:
                continue
            host = self._host_for(task_labels(plan))
            if host is None:
                continue
            queue.pop(index)
            host.busy += 1
            self.provider_busy[provider] += 1
            self._serial += 1
            return plan, Slot(host.name, provider, self._serial)
        return None

    async def take(self, queue: list[TrialPlan], stopping: Callable[[], bool] = lambda: False,
                   poll: float = 1.0, admit: Callable[[TrialPlan], bool] = lambda plan: True
                   ) -> tuple[TrialPlan, Slot] | None:
        """Wait for a trial that can be placed; None when the queue empties or the run stops.

        When every host has been down for ``give_up_after`` seconds the queue is dropped (the
        trials run when the suite is run again) rather than waiting forever.
        """
        all_down_since: float | None = None
        loop = asyncio.get_running_loop()
        while queue and not stopping() and any(admit(plan) for plan in queue):
            taken = self.try_take(queue, admit)
            if taken is not None:
                return taken
            if any(h.up for h in self.hosts.values()):
                all_down_since = None
            else:
                all_down_since = all_down_since or loop.time()
                if loop.time() - all_down_since >= self.give_up_after:
                    self.on_give_up(len(queue))
                    queue.clear()
                    return None
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), poll)
            except TimeoutError:
                pass
        return None

    def release(self, slot: Slot | None, token: str | None = None) -> None:
        if token is not None:
            self._by_token.pop(token, None)
        if slot is None:
            return
        host = self.hosts.get(slot.host)
        if host is not None and host.busy > 0:
            host.busy -= 1
        if slot.provider is not None and self.provider_busy[slot.provider] > 0:
            self.provider_busy[slot.provider] -= 1
        self._changed.set()

    def bind(self, token: str, slot: Slot | None) -> None:
        if slot is not None:
            self._by_token[token] = slot

    def slot_for(self, token: str) -> Slot | None:
        return self._by_token.get(token)

    # -- host health ---------------------------------------------------------------------------

    def mark_down(self, name: str, reason: str) -> None:
        host = self.hosts[name]
        if host.up:
            host.up, host.down_reason = False, reason
            self.on_change(host)
        self._changed.set()

    def mark_up(self, name: str) -> None:
        host = self.hosts[name]
        if not host.up:
            host.up, host.down_reason = True, None
            self.on_change(host)
        self._changed.set()

    def pick(self, labels: frozenset[str] = frozenset()) -> Host | None:
        """A host for work that came without a slot (a direct ``open`` outside the scheduler)."""
        return self._host_for(labels) or next((h for h in self.hosts.values() if h.up), None)
