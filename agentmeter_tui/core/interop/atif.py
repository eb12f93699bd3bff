"""Our transcripts as ATIF trajectories and back.

Export groups the stored events of a trial into ATIF steps (:mod:`.atif_steps` says how).

Token classes in metrics (Harbor's convention, RFC 0001 v1.2): ``prompt_tokens`` is all
input (uncached + cache reads + cache writes), ``cached_tokens`` the cache reads,
``completion_tokens`` all output (reasoning included); cache writes and reasoning go in
``metrics.extra`` under the names Harbor's own converters use (``cache_creation_input_tokens``,
``reasoning_output_tokens``). Import accepts the other spellings producers use and never
invents a class a file does not state: no reasoning figure means reasoning is left in output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ..usage import TokenUsage
from . import atif_subagents
from .atif_read import ImportedEvent, events_from_trajectory, trajectory_totals
from .atif_schema import LATEST, AtifError, Trajectory, load_trajectory, parse_trajectory
from .atif_steps import _iso, rows_of, steps_of  # noqa: F401 - _iso: its test reads it here

__all__ = ["LATEST", "AtifError", "ImportedEvent", "Trajectory", "events_from_trajectory",
           "load_trajectory", "parse_trajectory", "trajectory_dict", "trajectory_from_events", "trajectory_json",
           "trajectory_totals", "trial_trajectory", "write_trajectory"]


def trajectory_from_events(events: Iterable[Sequence | Mapping], **given: Any) -> Trajectory:
    """An ATIF (:data:`LATEST`) trajectory of one trial's events: :func:`trajectory_dict`'s object,
    validated by the pydantic models. ``.to_json()`` gives the file, ``.to_json_dict()`` the
    JSON-ready dict (equal to :func:`trajectory_dict`'s)."""
    return Trajectory.model_validate(trajectory_dict(events, **given))


def trajectory_json(events: Iterable[Sequence | Mapping], **given: Any) -> bytes:
    """The bytes of :func:`trajectory_from_events`'s ``.to_json()``, without building the models
    (for a site's thousands of files; a test keeps the two equal)."""
    return orjson.dumps(trajectory_dict(events, **given), option=orjson.OPT_INDENT_2)


def trajectory_dict(
    events: Iterable[Sequence | Mapping],
    *,
    trial: Mapping[str, Any] | None = None,
    session_id: str | None = None,
    agent_name: str | None = None,
    agent_version: str | None = None,
    model_name: str | None = None,
    usage: TokenUsage | Mapping[str, int] | None = None,
    cost_usd: float | None = None,
    cost_source: str | None = None,
    usage_rows: Mapping[int, Mapping | Sequence] | None = None,
) -> dict[str, Any]:
    """An ATIF (:data:`LATEST`) trajectory of one trial's events, as its JSON object.

    ``events``: its stored events in seq order, as ``Store.events`` rows
    ``(seq, ts, kind, stream, text, data)`` (or mappings with those keys). ``trial``: its row of the
    ``trials`` table, when there is one (suite, task, model, cli, token classes, cost...); the
    keyword arguments override what it says. ``usage``: the trial's five classes (for
    ``final_metrics``). ``usage_rows``: the ``usage`` table's rows by seq; without them each
    usage event's figures are read from its text. A trial without events yet gives one system
    step (ATIF requires at least one). Sub-agents' events (an imported v1.7 trajectory's) go into
    ``subagent_trajectories`` (:mod:`.atif_subagents`).
    """
    row = dict(trial or {})
    cli = agent_name or row.get("cli")
    own, subs = atif_subagents.split(rows_of(events))
    steps = steps_of(own, usage_rows, row.get("cli") or agent_name, usage_from_text)
    if usage is not None:
        row.update(usage.as_dict() if isinstance(usage, TokenUsage) else usage)
    if cost_usd is not None:
        row["cost_actual_usd"], row["cost_actual_source"] = cost_usd, cost_source or row.get("cost_actual_source")
    model = model_name if model_name is not None else row.get("model")
    agent = {"name": str(cli or "unknown"), "version": str(agent_version or row.get("cli_version") or "unknown")}
    if model is not None:
        agent["model_name"] = model
    sid = session_id or _session_id(row)
    trajectory: dict[str, Any] = {"schema_version": LATEST, "session_id": sid, "agent": agent, "steps": steps,
                                  "final_metrics": _final_metrics(row, len(steps))}
    if trial:
        trajectory["extra"] = {"agentmeter": _trial_extra(row)}
    if subs:  # ATIF v1.7: each sub-agent its own trajectory, its tokens in the parent's total once
        trajectory["subagent_trajectories"] = atif_subagents.sub_trajectories(
            subs, LATEST, sid, lambda rows: steps_of(rows, usage_rows, None, usage_from_text))
    return trajectory


_USAGE_TEXT = re.compile(r"^in (-?\d+) cached (-?\d+) write (-?\d+) out (-?\d+) reasoning (-?\d+)")


def usage_from_text(text: str) -> TokenUsage | None:
    """The figures of a usage event from its text (the adapters' fixed format), or None."""
    match = _USAGE_TEXT.match(text or "")
    return TokenUsage(*(int(g) for g in match.groups())) if match else None


def trial_trajectory(store: Any, trial_id: int) -> Trajectory:
    """The trajectory of a stored trial, read through the store (rows, events, usage)."""
    trial = store.trial(trial_id)
    if trial is None:
        raise KeyError(f"no trial {trial_id}")
    return trajectory_from_events(list(store.events(trial_id)), trial=trial, usage_rows=store.usage_by_seq(trial_id))


def write_trajectory(trajectory: Trajectory, path: str | Path) -> Path:
    """Write ``trajectory.json`` atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(trajectory.to_json())
    tmp.replace(path)
    return path


def _session_id(trial: Mapping[str, Any]) -> str:
    return f"agentmeter-{trial.get('suite_id') or 'suite'}-{trial.get('id') or 0}"


def _final_metrics(trial: Mapping[str, Any], steps: int) -> dict[str, Any]:
    tokens = TokenUsage.from_dict(trial)
    actual = trial.get("cost_actual_usd")
    cost = actual if actual is not None else trial.get("cost_usd")
    source = trial.get("cost_actual_source") if actual is not None else trial.get("cost_source")
    extra: dict[str, Any] = {"agentmeter_tokens": tokens.as_dict(),
                             "total_cache_creation_input_tokens": tokens.cache_write,
                             "total_reasoning_output_tokens": tokens.reasoning}
    if source:
        extra["cost_source"] = source
    metrics: dict[str, Any] = {"total_prompt_tokens": tokens.uncached_input + tokens.cached_input + tokens.cache_write,
                               "total_completion_tokens": tokens.output + tokens.reasoning,
                               "total_cached_tokens": tokens.cached_input}
    if cost is not None:
        metrics["total_cost_usd"] = float(cost)
    return {**metrics, "total_steps": steps, "extra": extra}


_TRIAL_FIELDS = ("suite_id", "task_id", "tier", "model", "cli", "trial_index", "attempt", "status", "reason",
                 "passed", "quality", "turns", "tool_calls", "cost_usd", "cost_source", "cost_actual_usd",
                 "cost_actual_source", "started_at", "finished_at", "verifier_exit", "id")


def _trial_extra(trial: Mapping[str, Any]) -> dict[str, Any]:
    return {key: trial[key] for key in _TRIAL_FIELDS if trial.get(key) is not None}
