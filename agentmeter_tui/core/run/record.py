"""What a trial's row says when it ends: the cost columns with their sources, the verdict, the
extras kept beside them. Apart from :mod:`.trial`, which drives the trial, because this is
accounting (SPEC section 4) and reads the trial only once it is over."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from ..vocab import TrialStatus

if TYPE_CHECKING:
    from .control import Meter
    from .lifecycle import TrialOutcome
    from .trialview import TrialView

DIVERGENCE = Decimal("0.05")  # reported vs comparable cost: flag beyond 5 %


def final_fields(trial: TrialView, outcome: TrialOutcome, served: Any) -> dict[str, Any]:
    """The final row's outcome fields: status, verdict, the cost columns and the extras
    (verifier details, the proxy's summary beside what the CLI reported, what was served)."""
    status, reason, verdict = outcome
    costs = cost_fields(trial)
    extra: dict[str, Any] = {}
    if verdict and verdict.details:
        extra["verifier"] = verdict.details
    if trial.proxy_route is not None:
        extra["proxy"] = trial.proxy_route.summary()
        extra["reported_usage"] = trial.parser.usage.as_dict()  # what the CLI said, beside the proxy's
        if trial.proxy_route.charged_calls and trial.parser.reported_cost_usd is not None:
            # the provider's charge took the actual-cost column: the CLI's own figure stays beside it
            extra["reported_cost_usd"] = float(trial.parser.reported_cost_usd)
    if served:
        extra["scripted"] = served
    return {"status": status.value, "reason": reason,
            "passed": int(bool(verdict and verdict.passed and status == TrialStatus.PASSED)),
            "quality": float(verdict.quality) if verdict else 0.0,
            "verifier_exit": verdict.exit_code if verdict else None,
            "verifier_output": verdict.output if verdict else None,
            "extra": orjson.dumps(extra, default=str).decode() if extra else None, **costs}


def cost_fields(trial: TrialView) -> dict[str, Any]:
    """Comparable and actual cost with their sources (SPEC section 4).

    The CLI's own figure is comparable only where it bills its own provider's prices
    (Claude Code on Anthropic); anywhere else it is kept as the actual figure only.
    """
    provider = trial.ctx.suite.provider(trial.plan.config.model)
    reported = trial.parser.reported_cost_usd
    comparable, source = trial.cost, "snapshot" if trial.cost is not None else None
    if reported is not None and provider.kind in trial.adapter.reports_cost_for:
        comparable, source = reported, "reported"
    # What the provider says it charged (OpenRouter's usage.cost, read at the wire) is the
    # actual cost; else the CLI's own figure. Comparable, CLI-reported and charged figures
    # that disagree by more than DIVERGENCE flag the trial (review and reports show it).
    route = trial.proxy_route
    charged = route.charged if route is not None and route.charged_calls else None
    actual, actual_source = (charged, "provider") if charged is not None else \
        (reported, f"{trial.adapter.name}:reported" if reported is not None else None)
    figures = [f for f in (trial.cost, reported, charged) if f is not None]
    if len(figures) > 1 and max(figures) > 0 and \
            (max(figures) - min(figures)) / max(figures) > DIVERGENCE:
        trial.flags.add("cost-divergence")
    if route is not None:
        from ..proxy import diverges

        if diverges(trial.usage, trial.parser.usage):
            trial.flags.add("usage-divergence")
        usage_source = "proxy"
    else:
        usage_source = "session" if "usage-recovered" in trial.flags else "stdout"
    return {"cost_usd": None if comparable is None else float(comparable), "cost_source": source,
            "cost_actual_usd": None if actual is None else float(actual),
            "cost_actual_source": actual_source,
            "usage_source": usage_source,
            "flags": orjson.dumps(sorted(trial.flags)).decode() if trial.flags else None}


def trial_row(trial: TrialView, **fields: Any) -> dict[str, Any]:
    """The trial's row: its cell, its attempt and its counters so far, then ``fields``."""
    plan = trial.plan
    row = {"run_id": trial.ctx.run_id, "suite_id": trial.ctx.suite.id, "task_id": plan.task.id,
           "tier": plan.task.tier, "config_id": plan.config_id, "model": plan.config.model.id,
           "cli": plan.config.cli.label, "trial_index": plan.trial_index, "attempt": plan.attempt,
           "proc_token": trial.token, "cli_version": trial.adapter.version,
           **trial.usage.as_dict(), "cache_write_1h": trial.usage.cache_write_1h, "turns": trial.turns,
           "tool_calls": trial.tool_calls,
           "flags": orjson.dumps(sorted(trial.flags)).decode() if trial.flags else None}
    row.update(fields)
    if isinstance(status := row.get("status"), TrialStatus):
        row["status"] = status.value
    return row


def meter(trial: TrialView) -> Meter:
    """The trial as the live feed describes it."""
    life = trial.lifecycle
    num = lambda value: None if value is None else float(value)  # noqa: E731
    return {"id": trial.id, "task": trial.plan.task.id, "model": trial.plan.config.model.id,
            "cli": trial.plan.config.cli.label, "trial": trial.plan.trial_index, "status": life.status.value,
            "reason": life.reason, "tokens": trial.usage.as_dict(), "cost_usd": num(trial.cost),
            "reported_cost_usd": num(trial.parser.reported_cost_usd), "turns": trial.turns,
            "tool_calls": trial.tool_calls, "flags": sorted(trial.flags), "elapsed": life.elapsed(),
            "budget": trial.budget.model_dump(), "events": trial.seq, "node": trial.node,
            "budget_hold": trial.hold.remaining(),
            # behind the proxy, "tokens" are the proxy's and the CLI's own figures come beside them
            "metered_by": "proxy" if trial.proxy_route else "cli",
            "reported_tokens": trial.parser.usage.as_dict() if trial.proxy_route else None}


def with_redactions(fields: dict[str, Any], count: int) -> dict[str, Any]:
    """The final row's fields with ``extra.redactions``: how many secrets the trial's stored
    text had replaced (core/redact.py), shown in review; none: nothing added."""
    if count:
        extra = orjson.loads(fields["extra"]) if fields.get("extra") else {}
        extra["redactions"] = count
        fields["extra"] = orjson.dumps(extra, default=str).decode()
    return fields

