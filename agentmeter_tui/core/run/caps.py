"""The run's caps: what the whole run, one provider or one model may spend (``[budgets.run]``,
``[budgets.providers.P]``, ``[budgets.models.M]``), against what it has spent.

A trial's budget bounds one trial; a cap bounds the bill. The ledger hears every trial's usage
(the proxy's figures behind the proxy, the CLI's otherwise) and answers three questions:

- may a trial start? Behind the proxy: while every cap it falls under has room, since the proxy
  stops the call that reaches one. Without the proxy nothing stops a trial between two of its
  CLI's turns, so a trial starts only if its *committed* spend fits: what is spent, plus what
  the running trials may still spend under their own budgets, plus its own budget. A running
  trial with no budget in a capped measure may spend anything, so nothing else of that scope
  starts beside it.
- may a model call go (proxy)? It waits while the calls in flight in a capped scope, each
  counted at the largest call seen there, could pass the cap; a call alone always goes while the
  spend is under the cap. So a cap is passed by at most about one call's cost.
- is a cap reached? Then the trial is killed (``budget:run``, ``budget:provider``,
  ``budget:model``) and the scheduler holds what the cap covers until it is raised.

The spend counted is the suite's in this store: what earlier runs spent (a run stopped and run
again, a rerun) is loaded when the runner starts, so a cap bounds the whole bill.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Collection
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..suites.suitefile import Cap
from ..suites.budget import Budget
from ..usage import TokenUsage
from ..vocab import KillReason

if TYPE_CHECKING:
    from ..suites.suitefile import ModelEntry
    from ..suites.suite import Suite

Scope = tuple[str, str]  # ("run", ""), ("provider", name), ("model", id)
RUN: Scope = ("run", "")
NEAR = 0.9  # spent at this share of a cap counts as near it (`status --wait-cap`)


def scope_name(scope: Scope) -> str:
    return "run" if scope == RUN else f"{scope[0]} {scope[1]}"


class CapLedger:
    def __init__(self, suite: Suite):
        self.suite = suite
        budgets = suite.spec.budgets
        self.caps: dict[Scope, Cap] = {}
        if budgets.run is not None:
            self.caps[RUN] = budgets.run
        self.caps.update({("provider", p): cap for p, cap in budgets.providers.items()})
        self.caps.update({("model", m): cap for m, cap in budgets.models.items()})
        self.usd: dict[Scope, Decimal] = defaultdict(Decimal)
        self.tokens: dict[Scope, int] = defaultdict(int)
        self.inflight: dict[Scope, int] = defaultdict(int)
        self.largest: dict[Scope, tuple[Decimal, int]] = {}  # the largest call seen per scope (usd, tokens)
        self._changed: asyncio.Condition | None = None

    # -- scopes ----------------------------------------------------------------------------

    def scopes(self, model: ModelEntry) -> list[Scope]:
        return [RUN, ("provider", model.provider), ("model", model.id)]

    def capped(self, model: ModelEntry) -> list[Scope]:
        return [s for s in self.scopes(model) if s in self.caps]

    def set_cap(self, scope: Scope, usd: float | None = None, tokens: int | None = None,
                clear: Collection[str] = ()) -> Cap:
        """Change a cap live (the ``cap`` op); a measure not given keeps its value, one in
        ``clear`` is no longer capped, and a scope capped in neither measure has no cap."""
        kept = {k: v for k, v in self.caps.get(scope, Cap()).model_dump().items() if k not in clear}
        cap = Cap(**kept).merged(Cap(usd=usd, tokens=tokens))
        if cap.usd is None and cap.tokens is None:
            self.caps.pop(scope, None)
        else:
            self.caps[scope] = cap
        self._notify()
        return cap

    # -- spend -----------------------------------------------------------------------------

    def spent(self, scope: Scope) -> tuple[float, int]:
        """What ``scope`` has spent (usd, tokens), capped or not."""
        return float(self.usd.get(scope, 0)), self.tokens.get(scope, 0)

    def preload(self, spent: dict[str, tuple[float, int]]) -> None:
        """What earlier runs of the suite spent in this store ({model: (usd, tokens)}): a run
        stopped and run again is one bill."""
        models = {m.id: m for m in self.suite.spec.models}
        for model_id, (usd, tokens) in spent.items():
            scopes = self.scopes(models[model_id]) if model_id in models else [RUN]
            for scope in scopes:
                self.usd[scope] += Decimal(str(usd))
                self.tokens[scope] += int(tokens)

    def add(self, model: ModelEntry, usage: TokenUsage, cost: Decimal | None) -> None:
        for scope in self.scopes(model):
            self.tokens[scope] += usage.raw
            if cost is not None:
                self.usd[scope] += cost
        self._notify()

    def reached(self, model: ModelEntry) -> KillReason | None:
        """The first cap over this model whose spend has reached it, as a kill reason."""
        for scope in self.capped(model):
            cap = self.caps[scope]
            if cap.usd is not None and self.usd[scope] >= Decimal(str(cap.usd)):
                return KillReason(f"budget:{scope[0]}", f"{scope_name(scope)}: ${self.usd[scope]:.4f} >= ${cap.usd}")
            if cap.tokens is not None and self.tokens[scope] >= cap.tokens:
                return KillReason(f"budget:{scope[0]}", f"{scope_name(scope)}: {self.tokens[scope]} >= {cap.tokens}")
        return None

    def may_start(self, model: ModelEntry, budget: Budget, running: list[Any], proxy: bool) -> str | None:
        """None when a trial of ``model`` under ``budget`` may start beside ``running`` (the
        running TrialRuns), else why not."""
        reached = self.reached(model)
        if reached is not None:
            return f"cap reached: {reached.detail}"
        if proxy:
            return None
        for scope in self.capped(model):
            cap = self.caps[scope]
            mine = [t for t in running if scope in self.scopes(t.plan.config.model)]
            for measure, spent, limit, own in (("usd", self.usd[scope], cap.usd, budget.usd),
                                               ("tokens", self.tokens[scope], cap.tokens, budget.tokens)):
                if limit is None:
                    continue
                committed = _committed(measure, mine)
                if committed is None or own is None and mine:
                    return f"{scope_name(scope)}: waiting for running trials without a {measure} budget"
                total = Decimal(str(spent)) + committed + Decimal(str(own or 0))
                if total > Decimal(str(limit)):
                    return (f"{scope_name(scope)}: committed {measure} {_show(total, measure)} would pass "
                            f"the cap {_show(limit, measure)}")
        return None

    # -- model calls at the proxy ----------------------------------------------------------

    async def reserve(self, model: ModelEntry) -> list[Scope]:
        """Wait until a call of ``model`` may go; the scopes to :meth:`settle` when it ends."""
        scopes = self.capped(model)
        if not scopes:
            return []
        changed = self._condition()
        async with changed:
            await changed.wait_for(lambda: all(self._room(s) for s in scopes))
            for scope in scopes:
                self.inflight[scope] += 1
        return scopes

    def settle(self, scopes: list[Scope], usage: TokenUsage, cost: Decimal | None) -> None:
        for scope in scopes:
            self.inflight[scope] -= 1
            usd, tokens = self.largest.get(scope, (Decimal(0), 0))
            self.largest[scope] = (max(usd, cost or Decimal(0)), max(tokens, usage.raw))
        self._notify()

    def _room(self, scope: Scope) -> bool:
        cap = self.caps.get(scope)
        if cap is None or not self.inflight[scope]:
            return True  # alone, a call goes (a reached cap refuses it in admit_call)
        largest = self.largest.get(scope)
        if largest is None:
            return False  # no call's size known yet: one at a time
        n = self.inflight[scope] + 1
        return (cap.usd is None or self.usd[scope] + n * largest[0] <= Decimal(str(cap.usd))) and \
            (cap.tokens is None or self.tokens[scope] + n * largest[1] <= cap.tokens)

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _notify(self) -> None:
        changed = self._changed
        if changed is None:
            return

        async def wake() -> None:
            async with changed:
                changed.notify_all()

        asyncio.get_running_loop().create_task(wake())

    # -- what status shows -----------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        """Each cap with its spend, its share used and its state: ``ok``, ``near``, ``hit``."""
        rows = []
        for scope, cap in self.caps.items():
            shares = [float(self.usd[scope]) / cap.usd if cap.usd else None,
                      self.tokens[scope] / cap.tokens if cap.tokens else None]
            share = max((s for s in shares if s is not None), default=0.0)
            rows.append({"scope": scope[0], "name": scope[1], "usd": cap.usd, "tokens": cap.tokens,
                         "spent_usd": float(self.usd[scope]), "spent_tokens": self.tokens[scope],
                         "share": round(share, 4), "state": "hit" if share >= 1 else "near" if share >= NEAR else "ok"})
        return rows


def _committed(measure: str, running: list[Any]) -> Decimal | None:
    """What the running trials may still spend in ``measure`` under their budgets (None: unbounded)."""
    total = Decimal(0)
    for trial in running:
        limit = getattr(trial.budget, measure)
        if limit is None:
            return None
        used = trial.usage.raw if measure == "tokens" else (trial.cost or Decimal(0))
        total += max(Decimal(0), Decimal(str(limit)) - Decimal(str(used)))
    return total


def _show(value: Any, measure: str) -> str:
    return f"${float(value):.4f}" if measure == "usd" else str(int(value))


def against_forecast(rows: list[dict[str, Any]], forecast: dict[str, Any], suite: Suite) -> list[dict[str, Any]]:
    """The caps' rows with what the forecast projects under each (``forecast_usd``,
    ``forecast_tokens``) and whether that passes the cap (``forecast_passes``)."""
    if not forecast.get("basis"):
        return rows
    models = forecast.get("models", {})
    for row in rows:
        if row["scope"] == "run":
            usd, tokens = forecast["usd"]["projected"], forecast["tokens"]["projected"]
        else:
            ids = [row["name"]] if row["scope"] == "model" else \
                [m.id for m in suite.spec.models if m.provider == row["name"]]
            usd = sum(models.get(i, {}).get("usd", 0.0) for i in ids)
            tokens = sum(models.get(i, {}).get("tokens", 0) for i in ids)
        row.update(forecast_usd=round(usd, 6), forecast_tokens=int(tokens),
                   forecast_passes=bool(row["usd"] and usd > row["usd"] or row["tokens"] and tokens > row["tokens"]))
    return rows
