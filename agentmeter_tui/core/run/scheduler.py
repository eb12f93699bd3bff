"""The grid schedule: every (task x configuration x trial) cell, interleaved, bounded, resumable.

Cells are ordered trial round first, then task, then configuration, so the first results
cover every configuration of every task before any cell gets its second trial. A cell is
done once it has a countable final trial (passed, failed, killed, errored); infra-invalid
attempts are retried up to ``max_retries`` and stay in the store for cost accounting. A trial
interrupted by a stop or a lost runner is infra-invalid too but uses up no retry: it runs again
whenever the suite is run again. On a
restart the same rule applies to what the store already holds, so no finished trial runs
twice.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections import defaultdict
from typing import TYPE_CHECKING

from ..procs import SWEEPER
from ..vocab import ACTIVE_STATUSES, COUNTABLE_STATUSES, INTERRUPTED, INTERRUPTED_LOST, TrialStatus
from .context import RunContext
from .placement import Placement, Slot
from .trial import TrialPlan, TrialRun

if TYPE_CHECKING:
    from ..suites import Suite


def plan_cells(suite: Suite, config_ids: dict[str, int]) -> list[TrialPlan]:
    plans = []
    for trial_index in range(1, suite.spec.suite.trials + 1):
        for task in suite.tasks:
            for config in suite.configurations():
                plans.append(TrialPlan(task, config, config_ids.get(config.key, 0), trial_index))
    return plans


def cells_left(store, suite: Suite) -> int:
    """How many cells a run of ``suite`` on this store would run now (0: the suite is complete),
    by the same rule the runner uses (a configuration the store has not seen has no trial yet)."""
    config_ids = store.configuration_ids(suite.id)
    return len(pending_plans(store, suite.id, plan_cells(suite, config_ids), suite.spec.suite.max_retries))


def recover_previous(store, suite_id: str) -> int:
    """Trials a dead runner left active become infra-invalid, and their processes are killed."""
    stale = store.trial_tokens(suite_id, ACTIVE_STATUSES | {TrialStatus.QUEUED})
    tokens = {row["proc_token"] for row in stale if row["proc_token"]}
    if tokens:
        SWEEPER.add_all(tokens)
        SWEEPER.final()  # one environment scan for all of them, repeated until none is left
    store.set_trials_status([row["id"] for row in stale], TrialStatus.INFRA_INVALID.value, INTERRUPTED_LOST)
    return len(stale)


def pending_plans(store, suite_id: str, plans: list[TrialPlan], max_retries: int) -> list[TrialPlan]:
    attempts: dict[tuple, int] = defaultdict(int)
    done: set[tuple] = set()
    for row in store.cell_statuses(suite_id):
        cell = (row["task_id"], row["config_id"], row["trial_index"])
        if row["status"] in COUNTABLE_STATUSES:
            done.add(cell)
        elif row["status"] == TrialStatus.INFRA_INVALID and not (row["reason"] or "").startswith(INTERRUPTED):
            attempts[cell] += 1  # an interrupted trial (a stop, a lost runner) is no failed attempt
    out = []
    for plan in plans:
        cell = (plan.task.id, plan.config_id, plan.trial_index)
        if cell in done or attempts[cell] > max_retries:
            continue
        plan.attempt = attempts[cell]
        out.append(plan)
    return out


class Scheduler:
    def __init__(self, ctx: RunContext, plans: list[TrialPlan], *, concurrency: int, max_retries: int):
        self.ctx = ctx
        self.queue: list[TrialPlan] = list(plans)
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.running: dict[int, TrialRun] = {}
        self.finished = 0
        self.total = len(plans)
        self.paused = asyncio.Event()
        self.paused.set()  # set = running; cleared = paused
        # Holds are pauses our side puts on the schedule (a full disk under the store, a model
        # server being restarted): no trial starts while any is on; each says why.
        self.holds: dict[str, str] = {}
        self.unheld = asyncio.Event()
        self.unheld.set()
        self.stopping = False
        self._budget_overrides: dict[str, float] = {}
        # which host's slot each trial gets: per-host slots and per-provider limits
        self.placement = Placement.for_run(ctx.sandbox, ctx.suite)

    def pause(self) -> None:
        self.paused.clear()

    def resume(self) -> None:
        self.paused.set()

    def hold(self, name: str, why: str) -> None:
        self.holds[name] = why
        self.unheld.clear()

    def release(self, name: str) -> None:
        self.holds.pop(name, None)
        if not self.holds:
            self.unheld.set()

    def set_default_budget(self, **limits: float | None) -> None:
        self._budget_overrides.update({k: v for k, v in limits.items() if v is not None})

    async def run(self) -> None:
        slots = asyncio.Semaphore(self.concurrency)
        tasks: set[asyncio.Task] = set()
        while True:
            if self.stopping:
                self.queue.clear()
            if not self.queue and not tasks:
                return
            if self.queue:
                await self.paused.wait()
                await self.unheld.wait()
                await slots.acquire()
                # A pause or hold that came while this loop waited for a slot holds the trial back too.
                if self.stopping or not self.queue or not self.paused.is_set() or not self.unheld.is_set():
                    slots.release()
                    continue
                taken = await self.placement.take(self.queue, lambda: self.stopping)
                if taken is None:
                    slots.release()
                    continue
                plan, slot = taken
                task = asyncio.create_task(self._one(plan, slots, slot))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            else:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)

    async def _one(self, plan: TrialPlan, slots: asyncio.Semaphore, slot: Slot | None = None) -> None:
        # Everything from the trial's making to its end is inside the try: whatever raises, the
        # concurrency slot and the host's slot are given back and the cell is retried, so the
        # schedule never shrinks nor waits for a slot nobody holds.
        trial: TrialRun | None = None
        status = TrialStatus.INFRA_INVALID
        try:
            trial = TrialRun(self.ctx, plan)
            self.running[id(trial)] = trial
            self.placement.bind(trial.token, slot)
            if self._budget_overrides:
                trial.raise_budget(**self._budget_overrides)
            status = await trial.execute()
        except Exception as exc:  # a bug on our side: say so, keep the schedule going
            self.ctx.log(f"trial {trial and trial.id} failed in the runner: {exc!r}\n{traceback.format_exc()}")
        finally:
            if trial is not None:
                self.running.pop(id(trial), None)
            self.placement.release(slot, trial and trial.token)
            slots.release()
        retry = status == TrialStatus.INFRA_INVALID and plan.attempt < self.max_retries and not self.stopping
        if retry:
            self.total += 1
        self.finished += 1
        if trial is not None:
            self.ctx.sink.trial_finished(trial)
        if retry and trial is not None and trial.provider_errors.gave_up:
            # The provider failed the agent: back off (at least its retry-after) before the retry.
            # This task stays alive meanwhile, so the schedule does not end under the retry.
            await self._wait(trial.provider_errors.backoff(plan.attempt))
        if retry and not self.stopping:
            self.queue.append(TrialPlan(plan.task, plan.config, plan.config_id, plan.trial_index, plan.attempt + 1))

    async def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(left, 0.25))  # a stop cuts the backoff short

    def trial(self, trial_id: int) -> TrialRun | None:
        for trial in self.running.values():
            if trial.id == trial_id:
                return trial
        return None
