"""Rerun by hand: new attempts for finished cells, appended as further trials (nothing is
overwritten), so the report's latest-completed rule then selects them. Asked of a running
runner (the socket's ``rerun`` op) or given to a new one (``--rerun``) on a finished store."""

from __future__ import annotations

from collections.abc import Collection

from collections import Counter
from typing import TYPE_CHECKING

from .requests import Rerun
from .trialview import TrialPlan

if TYPE_CHECKING:
    from ..suites.suite import Suite
    from .control import Refused, RerunReply

Cell = tuple[str, int, int]  # task id, configuration id, trial index


def rerun_plans(store, suite: Suite, config_ids: dict[str, int], request: Rerun,
                busy: Collection[Cell] = frozenset()) -> list[TrialPlan]:
    """A plan per cell whose latest trial matches ``request``, but for the ``busy`` ones (queued
    or running already). Its attempt number follows the cell's trials."""
    latest: dict[Cell, str] = {}
    trials: Counter[Cell] = Counter()
    for row in store.runs.trial_outcomes(suite.id):  # oldest first: the last one seen is the latest
        cell = (row["task_id"], row["config_id"], row["trial_index"])
        latest[cell] = row["status"]
        trials[cell] += 1
    configs = {config_ids[c.key]: c for c in suite.configurations() if c.key in config_ids}
    tasks = {t.id: t for t in suite.tasks}
    plans = []
    for cell, status in latest.items():
        task, config = tasks.get(cell[0]), configs.get(cell[1])
        if task is None or config is None or cell in busy or status not in request.statuses:
            continue
        if request.task not in (None, task.id) or request.model not in (None, config.model.id) or \
                request.cli not in (None, config.cli.label) or request.trial_index not in (None, cell[2]):
            continue
        plans.append(TrialPlan(task, config, cell[1], cell[2], trials[cell]))
    return plans


def rerun_live(runner, request: Rerun) -> Refused | RerunReply:
    """The ``rerun`` op on a running runner: the matching cells join its queue."""
    scheduler = runner.scheduler
    if scheduler is None or runner.config_ids is None:
        return {"ok": False, "error": "rerun: the run is preparing; ask again once it has started"}
    busy = {(p.task.id, p.config_id, p.trial_index) for p in scheduler.queue}
    busy |= {(t.plan.task.id, t.plan.config_id, t.plan.trial_index) for t in scheduler.running.values()}
    from ..store import Store

    store = Store(runner.db, readonly=True)  # committed rows only: a running trial is busy anyway
    try:
        plans = rerun_plans(store, runner.suite, runner.config_ids, request, busy)
    finally:
        store.close()
    scheduler.add(plans)
    return {"ok": True, "added": len(plans)}
