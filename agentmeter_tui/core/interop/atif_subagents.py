"""Sub-agents in an exported trajectory (ATIF v1.7 ``subagent_trajectories``).

A trial imported from a trajectory with embedded sub-agents keeps each one's events after a
system event that names it (``atif_read.events_from_trajectory``: text ``subagent NAME (AGENT):
N step(s)``, data ``{"subagent": NAME}``). On export those events become the sub-agent's own
trajectory again (steps numbered from 1, its ``trajectory_id`` unique in the array, its own
``final_metrics``), not steps of the parent; the parent's ``final_metrics`` is the trial's whole
total, sub-agents folded in, as Harbor's writers make it: counted once, not twice. A sub-agent's
own sub-agents were read in after it, so they come back as siblings, each once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from ..vocab import EventKind
from .atif_steps import Row

MARKER = re.compile(r"^subagent (?P<name>.+) \((?P<agent>[^()]*)\): \d+ step\(s\)$")


def _marker(row: Row) -> tuple[str, str] | None:
    """(name, agent) when ``row`` opens a sub-agent's events."""
    if str(row[2]) != EventKind.SYSTEM.value or not row[5] or not (match := MARKER.match(row[4] or "")):
        return None
    try:
        meta = orjson.loads(row[5])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(meta, dict) or meta.get("subagent") != match["name"]:
        return None
    return match["name"], match["agent"]


def split(rows: list[Row]) -> tuple[list[Row], list[tuple[str, str, list[Row]]]]:
    """The parent's rows, and each sub-agent's ``(name, agent, rows)`` in stored order."""
    parent: list[Row] = []
    subs: list[tuple[str, str, list[Row]]] = []
    for row in rows:
        if (opened := _marker(row)) is not None:
            subs.append((*opened, []))
        elif subs:
            subs[-1][2].append(row)
        else:
            parent.append(row)
    return parent, subs


def sub_trajectories(subs: list[tuple[str, str, list[Row]]], schema: str, session_id: str,
                     steps_of: Callable[[list[Row]], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The ``subagent_trajectories`` array: one complete trajectory per sub-agent."""
    out, seen = [], set()
    for name, agent, rows in subs:
        trajectory_id = name
        while trajectory_id in seen:  # ids must be unique in the array (Harbor's model checks it)
            trajectory_id += "'"
        seen.add(trajectory_id)
        steps = steps_of(rows)
        out.append({"schema_version": schema, "session_id": session_id, "trajectory_id": trajectory_id,
                    "agent": {"name": agent or "unknown", "version": "unknown"}, "steps": steps,
                    "final_metrics": _totals(steps)})
    return out


def _totals(steps: list[dict[str, Any]]) -> dict[str, Any]:
    metrics = [step["metrics"] for step in steps if "metrics" in step]
    totals: dict[str, Any] = {"total_prompt_tokens": sum(m.get("prompt_tokens") or 0 for m in metrics),
                              "total_completion_tokens": sum(m.get("completion_tokens") or 0 for m in metrics),
                              "total_cached_tokens": sum(m.get("cached_tokens") or 0 for m in metrics)}
    costs = [m["cost_usd"] for m in metrics if m.get("cost_usd") is not None]
    if costs:
        totals["total_cost_usd"] = sum(costs)
    return {**totals, "total_steps": len(steps)}
