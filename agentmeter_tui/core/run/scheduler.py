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
from decimal import Decimal
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ..procs import SWEEPER
from ..usage import TokenUsage
from ..vocab import (
    ACTIVE_STATUSES,
    INTERRUPTED,
    INTERRUPTED_LOST,
    TrialStatus,
    counts_as_done,
)
from .context import RunContext
from .placement import Placement, Slot
from .trial import TrialRun
from .trialview import TrialPlan

if TYPE_CHECKING:
    from ..suites.suite import Suite


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
    config_ids = store.runs.configuration_ids(suite.id)
    return len(pending_plans(store, suite.id, plan_cells(suite, config_ids), suite.spec.suite.max_retries))


def recover_previous(store, suite_id: str) -> int:
    """Trials a dead runner left active become infra-invalid with what they spent counted (a
    cap bounds the whole bill), and their processes are killed."""
    stale = store.runs.trial_tokens(suite_id, ACTIVE_STATUSES | {TrialStatus.QUEUED})
    tokens = {row["proc_token"] for row in stale if row["proc_token"]}
    if tokens:
        SWEEPER.add_all(tokens)
        SWEEPER.final()  # one environment scan for all of them, repeated until none is left
    store.runs.close_lost_trials([row["id"] for row in stale], TrialStatus.INFRA_INVALID.value, INTERRUPTED_LOST)
    return len(stale)


def pending_plans(store, suite_id: str, plans: list[TrialPlan], max_retries: int) -> list[TrialPlan]:
    attempts: dict[tuple, int] = defaultdict(int)
    done: set[tuple] = set()
    for row in store.runs.cell_statuses(suite_id):
        cell = (row["task_id"], row["config_id"], row["trial_index"])
        if counts_as_done(row["status"]):
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
        self.finished = 0  # attempts that ended, infra-invalid ones too
        self.done = 0  # trials that are done (``vocab.counts_as_done``): what progress shows
        self.total = len(plans)  # trials the run wants; a retry is another attempt of one of them
        self.paused = asyncio.Event()
        self.paused.set()  # set = running; cleared = paused
        # Holds are pauses our side puts on the schedule (a full disk under the store, a model
        # server being restarted): no trial starts while any is on; each says why.
        self.holds: dict[str, str] = {}
        self.unheld = asyncio.Event()
        self.unheld.set()
        self.stopping = False
        self._budget_overrides: dict[str, float] = {}
        self.cell_budgets: dict[tuple[str, str], dict[str, float]] = {}  # (model, cli) -> limits, live
        self.paused_models: set[str] = set()  # one model or CLI paused while the rest runs
        self.paused_clis: set[str] = set()
        self.waiting: dict[str, str] = {}  # why queued trials do not start now (caps, pauses), by scope
        self._starting: dict[int, SimpleNamespace] = {}  # taken plans whose trial is not made yet
        self._wake = asyncio.Event()  # something that may let a held-back trial start changed
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

    def set_cell_budget(self, model: str | None, cli: str | None, **limits: float) -> int:
        """Limits for the trials of one model, one CLI or one (model, CLI) cell, from now on and for
        the running ones; the number of running trials raised."""
        for key in {(m.id, c.label) for m, c in ((cfg.model, cfg.cli) for cfg in self.ctx.suite.configurations())}:
            if model in (None, key[0]) and cli in (None, key[1]):
                self.cell_budgets.setdefault(key, {}).update(limits)
        mine = [t for t in self.running.values() if model in (None, t.plan.config.model.id)
                and cli in (None, t.plan.config.cli.label)]
        for trial in mine:
            trial.raise_budget(**limits)
        self.wake()
        return len(mine)

    def pause_scope(self, model: str | None, cli: str | None, paused: bool) -> None:
        for names, name in ((self.paused_models, model), (self.paused_clis, cli)):
            if name is not None:
                (names.add if paused else names.discard)(name)
        self.wake()

    def add(self, plans: list[TrialPlan]) -> None:
        """More trials for the schedule (a rerun asked while it runs)."""
        if plans and not self.stopping:
            self.queue.extend(plans)
            self.total += len(plans)
            self.wake()

    def wake(self) -> None:
        """Look at the held-back trials again (a cap was raised, a model resumed, a trial ended)."""
        self._wake.set()

    def _limits_for(self, plan: TrialPlan) -> dict[str, float]:
        return {**self._budget_overrides, **self.cell_budgets.get((plan.config.model.id, plan.config.cli.label), {})}

    def budget_for(self, plan: TrialPlan):
        budget = self.ctx.suite.budget_for(plan.task)
        limits = self._limits_for(plan)
        return budget.merged(type(budget)(**limits)) if limits else budget

    def startable(self, plan: TrialPlan) -> bool:
        config = plan.config
        if config.model.id in self.paused_models or config.cli.label in self.paused_clis:
            self.waiting[f"paused {config.model.id}|{config.cli.label}"] = \
                f"{config.model.id if config.model.id in self.paused_models else config.cli.label} is paused"
            return False
        running = [*self.running.values(), *self._starting.values()]
        why = self.ctx.caps.may_start(config.model, self.budget_for(plan), running,
                                      proxy=self.ctx.proxy is not None)
        if why is not None:
            self.waiting[why.split(":", 1)[0]] = why
        return why is None

    async def _held_back(self) -> None:
        """No queued trial may start now: say why, and wait for a change. A cap that is reached
        (or that nothing running can free) pauses the schedule until it is raised."""
        reached = [why for why in self.waiting.values() if why.startswith("cap reached")]
        if reached or (not self.running and not self._starting and any("cap" in why for why in self.waiting.values())):
            self.hold("cap", (reached or sorted(self.waiting.values()))[0])
        self._wake.clear()
        await self._wake.wait()
        self.release("cap")

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
                self.waiting.clear()
                if not any(self.startable(plan) for plan in self.queue):
                    slots.release()
                    await self._held_back()
                    continue
                self.waiting.clear()
                taken = await self.placement.take(self.queue, lambda: self.stopping, admit=self.startable)
                if taken is None:
                    slots.release()
                    continue
                plan, slot = taken
                # Counted at once against the caps, before its task makes the trial
                self._starting[id(plan)] = SimpleNamespace(plan=plan, budget=self.budget_for(plan),
                                                           usage=TokenUsage(), cost=Decimal(0))
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
            self._starting.pop(id(plan), None)
            self.placement.bind(trial.token, slot)
            if limits := self._limits_for(plan):  # the run's and the cell's live limits
                trial.raise_budget(**limits)
            status = await trial.execute()
        except Exception as exc:  # a bug on our side: say so, keep the schedule going
            self.ctx.log(f"trial {trial and trial.id} failed in the runner: {exc!r}\n{traceback.format_exc()}")
        finally:
            self._starting.pop(id(plan), None)
            if trial is not None:
                self.running.pop(id(trial), None)
            self.placement.release(slot, trial.token if trial is not None else None)
            slots.release()
            self.wake()  # what it may still have spent is free for the held-back trials
        # A retry is the same planned trial again: no new one in the total (done counts finals).
        retry = status == TrialStatus.INFRA_INVALID and plan.attempt < self.max_retries and not self.stopping \
            and (trial is None or trial.retryable)
        self.finished += 1
        self.done += counts_as_done(status)
        if trial is not None:
            self.ctx.sink.trial_finished(trial)
        if retry and trial is not None and trial.provider_errors.gave_up:
            # The provider failed the agent: back off (at least its retry-after) before the retry.
            # This task stays alive meanwhile, so the schedule does not end under the retry.
            await self._wait(trial.provider_errors.backoff(plan.attempt))
        if retry and not self.stopping:
            self.queue.append(TrialPlan(plan.task, plan.config, plan.config_id, plan.trial_index, plan.attempt + 1))
            self.wake()  # the schedule may be waiting on held-back trials: the retry may start

    async def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(left, 0.25))  # a stop cuts the backoff short

    def trial(self, trial_id: int) -> TrialRun | None:
        for trial in self.running.values():
            if trial.id == trial_id:
                return trial
        return None
