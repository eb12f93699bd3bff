"""The run's forecast: its projected final USD, tokens and finish time, per model and per cell,
from what the finished trials cost and how long they took.

A trial still to run is estimated from the finished trials of its own cell (task x model x CLI)
when there are any, else of its task tier and model, else of its model scaled by the tier's
budget (a model seen on easy tasks only, scaled to a hard one by the budgets' ratio), else of
every finished trial. The interval (about 90 %) adds the spread of those trials, per trial to
come, to the uncertainty of the means themselves. ``benchmarks/forecast_error.py`` measures how
far it lands from the final figures on the paper grid's shape.
"""

from __future__ import annotations

from collections.abc import Sequence

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..vocab import TrialStatus

Z90 = 1.645
MEASURES = ("usd", "tokens", "seconds")


@dataclass
class Stats:
    n: int = 0
    total: list[float] = field(default_factory=lambda: [0.0] * len(MEASURES))
    squares: list[float] = field(default_factory=lambda: [0.0] * len(MEASURES))

    def add(self, values: tuple[float, ...]) -> None:
        self.n += 1
        for i, value in enumerate(values):
            self.total[i] += value
            self.squares[i] += value * value

    def mean(self, i: int) -> float:
        return self.total[i] / self.n

    def variance(self, i: int) -> float:
        if self.n < 2:
            return self.mean(i) ** 2  # one trial says little about the spread: as wide as itself
        return max(0.0, (self.squares[i] - self.total[i] ** 2 / self.n) / (self.n - 1))


@dataclass(frozen=True)
class Item:
    """A trial, finished or to come: its cell, tier and model, and its tier's budget in USD."""

    task: str
    model: str
    cli: str
    tier: str
    budget_usd: float | None = None


class Forecast:
    def __init__(self) -> None:
        self.cells: dict[tuple, Stats] = defaultdict(Stats)
        self.tiers: dict[tuple, Stats] = defaultdict(Stats)
        self.models: dict[str, Stats] = defaultdict(Stats)
        self.budget_share: dict[str, Stats] = defaultdict(Stats)  # cost / tier budget, per model
        self.all = Stats()
        self.spent = [0.0] * len(MEASURES)
        self.spent_by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # model or cell -> usd, tokens

    def finished(self, item: Item, usd: float, tokens: int, seconds: float, learn: bool = True) -> None:
        """A trial ended: its spend counts; with ``learn`` it is also a sample of what such a trial
        costs (not so one the infrastructure ended: cut short, it would pull its cell towards 0)."""
        values = (usd, float(tokens), seconds)
        for stats in (self.cells[(item.task, item.model, item.cli)], self.tiers[(item.tier, item.model)],
                      self.models[item.model], self.all):
            if learn:
                stats.add(values)
        if item.budget_usd and learn:
            self.budget_share[item.model].add((usd / item.budget_usd, 0.0, seconds))
        for i, value in enumerate(values):
            self.spent[i] += value
        for key in (item.model, f"{item.task}|{item.model}|{item.cli}"):
            self.spent_by[key][0] += usd
            self.spent_by[key][1] += tokens

    def estimate(self, item: Item) -> tuple[Stats, float] | None:
        """The finished trials ``item`` is estimated from, and the factor to scale them by."""
        for stats in (self.cells.get((item.task, item.model, item.cli)), self.tiers.get((item.tier, item.model))):
            if stats is not None and stats.n:
                return stats, 1.0
        share = self.budget_share.get(item.model)
        model = self.models.get(item.model)
        if share is not None and share.n and item.budget_usd and model is not None and model.mean(0) > 0:
            # scale the model's trials by what the tier's budget says of this tier against the others
            return model, share.mean(0) * item.budget_usd / model.mean(0)
        if model is not None and model.n:
            return model, 1.0
        return (self.all, 1.0) if self.all.n else None

    def project(self, to_come: list[Item], running: Sequence[tuple[Item, float, int, float]] = (),
                concurrency: int = 1, now: float | None = None) -> dict[str, Any]:
        """The projection once ``to_come`` (queued) and ``running`` ((item, usd, tokens, seconds so
        far) each) have run: totals with an interval, per model and per cell, and the finish time."""
        now = time.time() if now is None else now
        mean = [0.0] * len(MEASURES)
        spread = [0.0] * len(MEASURES)  # variance of the sum: the trials' own spread
        by_basis: dict[tuple[int, float], tuple[Stats, float, int]] = {}  # (id(stats), factor) -> (stats, factor, trials on it)
        totals = {key: list(values) for key, values in self.spent_by.items()}  # model or cell -> usd, tokens
        work = 0.0
        unseen = [0.0, 0.0]  # what trials of a tier not seen yet may add up to their budgets (the high end)
        spent = list(self.spent)
        items = [(item, None) for item in to_come] + [(item, so_far) for item, *so_far in running]
        for item, so_far in items:
            basis = self.estimate(item)
            if basis is None:
                continue
            stats, factor = basis
            est = [stats.mean(i) * factor for i in range(len(MEASURES))]
            if factor != 1.0 and est[0] > 0 and item.budget_usd:  # extrapolated: up to its budget
                unseen[0] += max(0.0, item.budget_usd - est[0])
                unseen[1] += max(0.0, est[1] * (item.budget_usd / est[0] - 1))
            keys = (item.model, f"{item.task}|{item.model}|{item.cli}")
            if so_far is not None:  # a running trial: what it spent is spent; the rest is to come
                for i in range(len(MEASURES)):
                    spent[i] += so_far[i]
                for key in keys:
                    total = totals.setdefault(key, [0.0, 0.0])
                    total[0] += so_far[0]
                    total[1] += so_far[1]
                est = [max(0.0, e - s) for e, s in zip(est, so_far)]
            for i in range(len(MEASURES)):
                mean[i] += est[i]
                spread[i] += stats.variance(i) * factor * factor
            basis_key = (id(stats), factor)
            seen = by_basis.get(basis_key)
            by_basis[basis_key] = (stats, factor, (seen[2] if seen else 0) + 1)
            for key in keys:
                total = totals.setdefault(key, [0.0, 0.0])
                total[0] += est[0]
                total[1] += est[1]
            work += est[2]
        for stats, factor, k in by_basis.values():  # the means are estimates too
            for i in range(len(MEASURES)):
                spread[i] += (k * factor) ** 2 * stats.variance(i) / stats.n
        out: dict[str, Any] = {"basis": self.all.n}
        for i, name in enumerate(("usd", "tokens")):
            centre, half = spent[i] + mean[i], Z90 * math.sqrt(spread[i])
            out[name] = {"spent": round(spent[i], 6), "projected": round(centre, 6),
                         "low": round(max(spent[i], centre - half), 6), "high": round(centre + half + unseen[i], 6)}
        left = work / max(1, concurrency)
        out["finish"] = {"seconds_left": round(left, 1), "at": round(now + left, 1),
                         "low": round(now + max(0.0, work - Z90 * math.sqrt(spread[2])) / max(1, concurrency), 1),
                         "high": round(now + (work + Z90 * math.sqrt(spread[2])) / max(1, concurrency), 1)}
        out["models"] = {k: {"usd": round(v[0], 6), "tokens": int(v[1])} for k, v in totals.items() if "|" not in k}
        out["cells"] = {k: {"usd": round(v[0], 6), "tokens": int(v[1])} for k, v in totals.items() if "|" in k}
        return out


class RunForecast:
    """The running schedule's forecast: fed each finished trial, projected at most once a
    second (the feed asks for it every tick)."""

    def __init__(self, every: float = 1.0) -> None:
        self.forecast = Forecast()
        self.every = every
        self._cached: tuple[float, dict[str, Any]] | None = None

    def load(self, rows: list[dict[str, Any]], suite: Any) -> None:
        """The suite's trials that ended in earlier runs (``store.runs.finished_costs``): the forecast
        starts from them, and its totals are the suite's whole bill, as the caps count it."""
        from datetime import datetime

        tasks = {t.id: t for t in suite.tasks}
        for row in rows:
            task = tasks.get(row["task_id"])
            budget = suite.budget_for(task).usd if task is not None else None
            try:
                seconds = (datetime.fromisoformat(row["finished_at"]) -
                           datetime.fromisoformat(row["started_at"])).total_seconds()
            except (TypeError, ValueError):  # an imported trial without times: no duration to learn
                seconds = 0.0
            item = Item(row["task_id"], row["model"], row["cli"], str(row["tier"] or ""), budget)
            self.forecast.finished(item, float(row["usd"]), int(row["tokens"]), max(0.0, seconds),
                                   learn=row["status"] != TrialStatus.INFRA_INVALID)

    def finished(self, trial: Any) -> None:
        self.forecast.finished(_item(trial.plan, trial.budget), float(trial.cost or 0), trial.usage.raw,
                               time.monotonic() - trial.started, learn=trial.status != TrialStatus.INFRA_INVALID)
        self._cached = None

    def project(self, scheduler: Any, ledger: Any = None) -> dict[str, Any]:
        """The projection of ``scheduler``'s run, floored at what ``ledger`` (the caps'
        :class:`~.caps.CapLedger`, which hears every call) counts as spent, with no finish time
        while the schedule is held or paused."""
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < self.every:
            return self._cached[1]
        budgets: dict[tuple, Any] = {}  # one budget per (task, model, cli): the queue repeats them
        to_come = []
        for plan in scheduler.queue:
            key = (plan.task.id, plan.config.key)
            if key not in budgets:
                budgets[key] = scheduler.budget_for(plan)
            to_come.append(_item(plan, budgets[key]))
        running = [(_item(t.plan, t.budget), float(t.cost or 0), t.usage.raw, now - t.started)
                   for t in scheduler.running.values()]
        projection = self.forecast.project(to_come, running, concurrency=scheduler.concurrency)
        if ledger is not None:
            floor_at_spend(projection, ledger.spent(("run", "")),
                           {m.id: ledger.spent(("model", m.id)) for m in ledger.suite.spec.models})
        stalled = stalled_by(scheduler)
        if stalled:
            projection["finish"] = {"held": stalled, "seconds_left": None, "at": None, "low": None, "high": None}
        self._cached = (now, projection)
        return projection


def floor_at_spend(projection: dict[str, Any], run: tuple[float, int],
                   models: dict[str, tuple[float, int]]) -> None:
    """Raise every figure of ``projection`` (spent, projected and both interval bounds; each
    model's) to what is already spent, as counted call by call (``run``, ``models``: usd and
    tokens each): the forecast learns a trial's spend only when it ends, and the bill never
    goes down (issue 38: "$1.13 spent, forecast $0.948")."""
    for name, spent in zip(("usd", "tokens"), run):
        figures = projection.get(name)
        if figures:
            floor = max(float(spent), figures["spent"])
            figures.update({k: round(max(v, floor), 6) for k, v in figures.items()})
    for model, (usd, tokens) in models.items():
        row = projection.setdefault("models", {}).get(model)
        if row is not None:
            row["usd"], row["tokens"] = round(max(row["usd"], float(usd)), 6), max(row["tokens"], int(tokens))


def stalled_by(scheduler: Any) -> str | None:
    """Why the schedule starts nothing now (``held: ...``, ``paused``), or None: then no finish
    time is a forecast, it depends on the operator."""
    holds = sorted(getattr(scheduler, "holds", {}).values())
    if holds:
        return f"held: {holds[0]}"
    paused = getattr(scheduler, "paused", None)
    if paused is not None and not paused.is_set():
        return "paused"
    return None


def _item(plan: Any, budget: Any) -> Item:
    return Item(plan.task.id, plan.config.model.id, plan.config.cli.label, str(plan.task.tier or ""),
                budget.usd)
