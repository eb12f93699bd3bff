"""ATIF trajectories from any producer (every version from ATIF-v1.0) as our events.

A step is read in the order our writer fills it (:mod:`.atif`): reasoning, message, metrics,
tool calls, tool results; a user step becomes a system event ``user: ...``; a system step
written by us becomes the kind it was. Token classes: see :func:`usage_from_metrics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from ..harnesses.jsonl import tool_text
from ..usage import TokenUsage
from ..vocab import EventKind
from .atif_schema import CACHE_WRITE_KEYS, PROMPT_IN_COMPLETION_KEYS, REASONING_KEYS, Metrics, Step, Trajectory, content_text


def split_tool_key(tool_key: str, tool_name: str | None = None) -> tuple[str, dict[str, Any]]:
    """Name and arguments of a tool call from its thrash key (``name:canonical-json``)."""
    name, _, arguments = tool_key.partition(":")
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        value = arguments
    return tool_name or name, value if isinstance(value, dict) else {"input": value}


@dataclass(slots=True)
class ImportedEvent:
    """One event read from another tool's file, ready for the store."""

    kind: EventKind
    text: str
    ts: float | None = None
    meta: dict[str, Any] | None = None  # tool name, arguments, call id, error flag, model
    usage: TokenUsage | None = None
    cost_usd: float | None = None
    model: str | None = None


def usage_from_metrics(metrics: Metrics | Mapping[str, Any]) -> TokenUsage:
    """The five classes from ATIF metrics; a class the metrics do not state stays where the
    format puts it (reasoning inside completion, cache writes inside prompt)."""
    m = metrics if isinstance(metrics, Mapping) else metrics.model_dump()
    extra = m.get("extra") or {}
    prompt, completion, cached = (_int(m.get("prompt_tokens")), _int(m.get("completion_tokens")),
                                  _int(m.get("cached_tokens")))
    cache_write = next((_int(extra[k]) for k in CACHE_WRITE_KEYS if extra.get(k) is not None), 0)
    reasoning = next((_int(extra[k]) for k in REASONING_KEYS if extra.get(k) is not None), 0)
    read = sum(_int(extra.get(k)) for k in PROMPT_IN_COMPLETION_KEYS)
    reasoning = min(reasoning, completion)  # a figure past its own total is not believed past it
    read = min(read, completion - reasoning)
    return TokenUsage(uncached_input=max(0, prompt - cached - cache_write) + read, cached_input=cached,
                      cache_write=cache_write, output=completion - reasoning - read, reasoning=reasoning)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def parse_ts(value: str | None) -> float | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()  # naive: UTC


def events_from_trajectory(trajectory: Trajectory) -> list[ImportedEvent]:
    """The events of a trajectory from any producer, in step order (see the module doc)."""
    out: list[ImportedEvent] = []
    for step in trajectory.steps:
        events = _step_events(step, trajectory.agent.model_name)
        # What a producer put on the step beyond what we read: kept with the step's first event.
        kept = {**step.unknown(), **{k: v for k, v in (step.extra or {}).items() if not k.startswith("agentmeter")}}
        if events and kept:
            events[0].meta = {**(events[0].meta or {}), "atif_step": kept}
        out.extend(events)
    for sub in trajectory.subagent_trajectories or []:  # ATIF v1.7: each embedded sub-agent once
        name = sub.trajectory_id or sub.session_id or sub.agent.name
        out.append(ImportedEvent(EventKind.SYSTEM, f"subagent {name} ({sub.agent.name}): {len(sub.steps)} step(s)",
                                 meta={"subagent": name}))
        out.extend(events_from_trajectory(sub))
    return out


def _step_events(step: Step, default_model: str | None) -> list[ImportedEvent]:
    out: list[ImportedEvent] = []
    ts = parse_ts(step.timestamp)
    extra = step.extra or {}
    text = content_text(step.message)
    if step.source != "agent":
        kind = _kind(extra.get("agentmeter_kind")) or EventKind.SYSTEM
        out.append(ImportedEvent(kind, text if step.source == "system" or "agentmeter_kind" in extra
                                 else f"user: {text}", ts))
        for result in step.observation.results if step.observation else []:
            out.append(ImportedEvent(EventKind.SYSTEM, content_text(result.content), ts))
        return out
    model = step.model_name or default_model
    if step.reasoning_content is not None:
        out.append(ImportedEvent(EventKind.REASONING, step.reasoning_content, ts, model=model))
    if text or extra.get("agentmeter_empty_message"):
        out.append(ImportedEvent(EventKind.ASSISTANT, text, ts, model=model))
    if step.metrics is not None:
        usage = usage_from_metrics(step.metrics)
        label = (step.metrics.extra or {}).get("agentmeter_text")
        out.append(ImportedEvent(EventKind.USAGE, label if isinstance(label, str) else usage.text(), ts,
                                 usage=usage, cost_usd=step.metrics.cost_usd, model=model))
    for call in step.tool_calls or []:
        call_text = (call.extra or {}).get("agentmeter_text")
        out.append(ImportedEvent(EventKind.TOOL_CALL, call_text if isinstance(call_text, str)
                                 else tool_text(call.arguments), ts,
                                 {"tool_name": call.function_name, "arguments": call.arguments,
                                  "call_id": call.tool_call_id}, model=model))
    for result in step.observation.results if step.observation else []:
        is_error = bool((result.extra or {}).get("is_error"))
        meta = {"call_id": result.source_call_id, "is_error": is_error} if result.source_call_id or is_error \
            else None
        out.append(ImportedEvent(EventKind.TOOL_RESULT, content_text(result.content), ts, meta))
    return out


def _kind(value: Any) -> EventKind | None:
    try:
        return EventKind(value)
    except ValueError:
        return None


def _raw_sums(trajectory: Trajectory) -> tuple[int, int, int]:
    """(prompt, completion, cached) as the steps state them, sub-agents' included."""
    prompt = completion = cached = 0
    for step in trajectory.steps:
        if step.metrics is not None:
            prompt += _int(step.metrics.prompt_tokens)
            completion += _int(step.metrics.completion_tokens)
            cached += _int(step.metrics.cached_tokens)
    for sub in trajectory.subagent_trajectories or []:
        p, c, k = _raw_sums(sub)
        prompt, completion, cached = prompt + p, completion + c, cached + k
    return prompt, completion, cached


def _steps_total(trajectory: Trajectory) -> tuple[TokenUsage, float | None]:
    """The steps' five classes and cost, each embedded sub-agent's steps once (ATIF v1.7)."""
    total, cost = TokenUsage(), None
    for step in trajectory.steps:
        if step.metrics is not None:
            total = total + usage_from_metrics(step.metrics)
            if step.metrics.cost_usd is not None:
                cost = (cost or 0.0) + step.metrics.cost_usd
    for sub in trajectory.subagent_trajectories or []:
        sub_total, sub_cost = _steps_total(sub)
        total = total + sub_total
        if sub_cost is not None:
            cost = (cost or 0.0) + sub_cost
    return total, cost


def _final_total(trajectory: Trajectory) -> TokenUsage | None:
    fm = trajectory.final_metrics
    if fm is None or (fm.total_prompt_tokens is None and fm.total_completion_tokens is None):
        return None
    extra = fm.extra or {}
    return usage_from_metrics({
        "prompt_tokens": fm.total_prompt_tokens, "completion_tokens": fm.total_completion_tokens,
        "cached_tokens": fm.total_cached_tokens, "extra": {k.removeprefix("total_"): v for k, v in extra.items()}})


def _with_split(final: TokenUsage, steps: TokenUsage) -> TokenUsage:
    """``final``'s totals with the cache writes and reasoning its steps state where it states
    none (Gemini CLI's final_metrics has three totals, its steps the reasoning of each call)."""
    reasoning = min(max(final.reasoning, steps.reasoning), final.output + final.reasoning)
    write = min(max(final.cache_write, steps.cache_write), final.uncached_input + final.cache_write)
    return TokenUsage(uncached_input=final.uncached_input + final.cache_write - write, cached_input=final.cached_input,
                      cache_write=write, output=final.output + final.reasoning - reasoning, reasoning=reasoning)


def trajectory_totals(trajectory: Trajectory) -> tuple[TokenUsage, float | None, str]:
    """A trajectory's five classes, its cost and where they came from: our own total when the
    file is ours; else the steps' sum (sub-agents' steps once) when ``final_metrics`` states the
    same totals, so the split per step stands; else ``final_metrics`` when it counts more (calls
    a timeout cut off before their step was written; a parent's total that already includes its
    sub-agents, as Harbor's codex writer makes it), with the steps' split; else the steps."""
    fm = trajectory.final_metrics
    ours = (fm.extra or {}).get("agentmeter_tokens") if fm is not None else None
    if fm is not None and isinstance(ours, dict):
        return TokenUsage.from_dict(ours), fm.total_cost_usd, "atif:final_metrics"
    steps_sum, steps_cost = _steps_total(trajectory)
    final = _final_total(trajectory)
    if fm is None or final is None:  # no final_metrics, or none that counts tokens
        return steps_sum, steps_cost, "atif:steps"
    fm_cost = fm.total_cost_usd if fm.total_cost_usd is not None else steps_cost
    prompt, completion, cached = _raw_sums(trajectory)
    stated = (_int(fm.total_prompt_tokens), _int(fm.total_completion_tokens), _int(fm.total_cached_tokens))
    if stated == (prompt, completion, cached):
        return (steps_sum if final.reasoning <= steps_sum.reasoning and final.cache_write <= steps_sum.cache_write
                else _with_split(final, steps_sum)), fm_cost, "atif:steps"
    own = TokenUsage()
    for step in trajectory.steps:
        if step.metrics is not None:
            own = own + usage_from_metrics(step.metrics)
    if final.raw >= steps_sum.raw:
        return _with_split(final, steps_sum), fm_cost, "atif:final_metrics"
    if trajectory.subagent_trajectories and final.raw >= own.raw:
        # The parent's own total beside its sub-agents' (a writer that does not fold them in).
        subs = steps_sum - own
        return _with_split(final, own) + subs, fm_cost, "atif:final_metrics+subagents"
    return steps_sum, steps_cost, "atif:steps"
