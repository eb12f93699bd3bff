"""Our transcripts as ATIF trajectories and back.

Export groups the stored events of a trial into ATIF steps. An agent step holds, in this
order, at most one reasoning text, one assistant text, one usage figure (the metrics), any
number of tool calls and their results (the observation); an event that would go back
in that order opens the next step, so reading the steps back in that order gives the events
in their stored order. Every other event (system and runner notes, errors, raw lines) is a
system step of its own whose ``extra.agentmeter_kind`` says what it was.

Token classes in metrics (Harbor's convention, RFC 0001 v1.2): ``prompt_tokens`` is all
input (uncached + cache reads + cache writes), ``cached_tokens`` the cache reads,
``completion_tokens`` all output (reasoning included); cache writes and reasoning go in
``metrics.extra`` under the names Harbor's own converters use (``cache_creation_input_tokens``,
``reasoning_output_tokens``). Import accepts the other spellings producers use and never
invents a class a file does not state: no reasoning figure means reasoning is left in output.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..harnesses.jsonl import tool_text
from ..usage import TokenUsage
from ..vocab import EventKind, ParsedEvent
from .atif_read import ImportedEvent, events_from_trajectory, split_tool_key, trajectory_totals, usage_text
from .atif_schema import LATEST, AtifError, Trajectory, load_trajectory, parse_trajectory

__all__ = ["LATEST", "AtifError", "ImportedEvent", "StoredEvent", "Trajectory", "events_from_trajectory",
           "load_trajectory", "parse_trajectory", "trajectory_dict", "trajectory_from_events", "trajectory_json",
           "trajectory_totals", "trial_trajectory", "write_trajectory"]

# Slots of an agent step, in the order the step is read back.
_SLOTS = {EventKind.REASONING: 1, EventKind.ASSISTANT: 2, EventKind.USAGE: 3, EventKind.TOOL_CALL: 4,
          EventKind.TOOL_RESULT: 5}
_REPEATABLE = {4, 5}
_USAGE = EventKind.USAGE.value  # a plain str: the enum's attribute costs more than the compare, per event
PARSER_STREAMS = ("stdout", "stderr")  # events a CLI's parser made from its output lines


@dataclass(slots=True)
class StoredEvent:
    """One row of the events table, with the usage row written for it, if any."""

    seq: int
    ts: float | None
    kind: str
    stream: str | None
    text: str
    data: bytes | str | None = None
    usage: TokenUsage | None = None
    cost_usd: float | None = None
    model: str | None = None
    tool_name: str | None = None
    arguments: dict[str, Any] | None = None
    call_id: str | None = None
    is_error: bool = False


def stored_events(rows: Iterable[Sequence | Mapping], usage: Mapping[int, Mapping | Sequence] | None = None,
                  cli: str | None = None) -> list[StoredEvent]:
    """Rows ``(seq, ts, kind, stream, text, data)`` (as ``Store.events`` yields them) and usage
    rows by seq (``uncached_input``... ``reasoning``, ``cost_usd``, ``model``) as events with
    tool names, arguments and call ids where they can be recovered."""
    events = []
    usage = usage or {}
    for row in rows:
        # A store row is a tuple: the (slow) abstract-class check only for anything else.
        if type(row) is not tuple and isinstance(row, Mapping):
            row = (row["seq"], row.get("ts"), row["kind"], row.get("stream"), row.get("text") or "", row.get("data"))
        seq, ts, kind, stream, text, data = row
        event = StoredEvent(int(seq), ts, str(kind), stream, text or "", data)
        found = usage.get(event.seq) if event.kind == _USAGE else None
        if found is not None:
            if type(found) is dict or isinstance(found, Mapping):
                event.usage = TokenUsage.from_dict(found)
                event.cost_usd, event.model = found.get("cost_usd"), found.get("model")
            else:
                event.usage = TokenUsage(*found[:5])
        events.append(event)
    _attach_imported(events)
    if cli:
        _attach_reparsed(events, cli)
    return events


def _attach_imported(events: list[StoredEvent]) -> None:
    """Imported events keep tool name, arguments and call id as a JSON object in ``data``."""
    for event in events:
        if event.stream in PARSER_STREAMS or not event.data:
            continue
        try:
            meta = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(meta, dict):
            event.tool_name = meta.get("tool_name") if isinstance(meta.get("tool_name"), str) else None
            event.arguments = meta.get("arguments") if isinstance(meta.get("arguments"), dict) else None
            event.call_id = meta.get("call_id") if isinstance(meta.get("call_id"), str) else None
            event.is_error = bool(meta.get("is_error"))
            if event.model is None and isinstance(meta.get("model"), str):
                event.model = meta["model"]


def _attach_reparsed(events: list[StoredEvent], cli: str) -> None:
    """Tool names and arguments of a native trial: the stored raw lines are fed again through
    a fresh parser of the trial's CLI (deterministic), and the events it makes are matched to
    the stored rows that line produced (the raw line is stored with the first of them)."""
    from ..harnesses import ADAPTERS, get_adapter

    if cli not in ADAPTERS:
        return
    parser = get_adapter(cli).new_parser()
    i = 0
    while i < len(events):
        event = events[i]
        if event.stream not in PARSER_STREAMS or event.data is None:
            i += 1
            continue
        line = event.data.encode() if isinstance(event.data, str) else bytes(event.data)
        parsed: list[ParsedEvent] = parser.feed(event.stream, line)  # parsers never raise
        j = i
        for item in parsed:
            if j >= len(events) or events[j].stream != event.stream or events[j].kind != item.kind or \
                    (j > i and events[j].data is not None):
                break
            _take(events[j], item)
            j += 1
        i = max(j, i + 1)


def _take(event: StoredEvent, item: ParsedEvent) -> None:
    if item.model and event.model is None:
        event.model = item.model
    event.is_error = event.is_error or item.is_error
    if item.kind == EventKind.TOOL_CALL and item.tool_key:
        event.tool_name, event.arguments = split_tool_key(item.tool_key, item.tool_name)


def _iso(ts: float | None) -> str | None:
    """``ts`` as ``datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")`` with a Z,
    the same text: its seconds are formatted once per second (a trial's events share them; a
    site formats millions), its fraction rounded half-even to the microsecond as datetime does."""
    if ts is None:
        return None
    fraction, whole = math.modf(float(ts))
    micro = round(fraction * 1e6)
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    elif micro < 0:
        whole, micro = whole - 1, micro + 1_000_000
    return f"{_second(int(whole))}.{micro // 1000:03d}Z"


@lru_cache(maxsize=4096)
def _second(whole: int) -> str:
    return datetime.fromtimestamp(whole, UTC).isoformat()[:19]


def metrics_for(usage: TokenUsage, cost_usd: float | None = None) -> dict[str, Any]:
    """ATIF metrics of one usage figure, as the JSON object (fields in the model's order)."""
    metrics: dict[str, Any] = {"prompt_tokens": usage.uncached_input + usage.cached_input + usage.cache_write,
                               "completion_tokens": usage.output + usage.reasoning,
                               "cached_tokens": usage.cached_input}
    if cost_usd is not None:
        metrics["cost_usd"] = float(cost_usd)
    metrics["extra"] = {"cache_creation_input_tokens": usage.cache_write,
                        "reasoning_output_tokens": usage.reasoning}
    return metrics


@dataclass(slots=True)
class _Draft:
    """One step being filled, built as the JSON object ``Trajectory.to_json_dict`` would give (fields
    in the models' order, no null): a site writes thousands of trajectories, and building and
    dumping pydantic models for output we produce ourselves took most of its time. The models
    still validate every trajectory :func:`trajectory_from_events` returns."""

    source: str
    first: StoredEvent
    slot: int = 0
    message: str | None = None
    reasoning: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def accepts(self, slot: int) -> bool:
        return self.source == "agent" and (slot > self.slot or (slot == self.slot and slot in _REPEATABLE))

    def add(self, event: StoredEvent, slot: int) -> None:
        self.slot = slot
        self.model = self.model or event.model
        if slot == 1:
            self.reasoning = event.text
        elif slot == 2:
            self.message = event.text
            if event.text == "":
                self.extra["agentmeter_empty_message"] = True
        elif slot == 4:
            arguments = event.arguments if event.arguments is not None else {"input": event.text}
            call = {"tool_call_id": event.call_id or f"call_{event.seq}", "function_name": event.tool_name or "tool",
                    "arguments": arguments}
            if tool_text(arguments) != event.text:
                call["extra"] = {"agentmeter_text": event.text}
            self.calls.append(call)
        elif slot == 5:
            index = len(self.results)
            call_id = event.call_id if event.call_id and any(c["tool_call_id"] == event.call_id for c in self.calls) \
                else (self.calls[index]["tool_call_id"] if index < len(self.calls) else None)
            result: dict[str, Any] = {} if call_id is None else {"source_call_id": call_id}
            result["content"] = event.text
            if event.is_error:
                result["extra"] = {"is_error": True}
            self.results.append(result)
        elif slot == 3:
            self.metrics = metrics_for(event.usage or TokenUsage(), event.cost_usd)
            if event.text != usage_text(event.usage or TokenUsage()):
                self.metrics["extra"]["agentmeter_text"] = event.text

    def step(self, step_id: int) -> dict[str, Any]:
        step: dict[str, Any] = {"step_id": step_id}
        timestamp = _iso(self.first.ts)
        if timestamp is not None:
            step["timestamp"] = timestamp
        step["source"] = self.source
        if self.source != "agent":
            step["message"] = self.first.text
            step["extra"] = {"agentmeter_kind": self.first.kind}
            if self.first.stream:
                step["extra"]["agentmeter_stream"] = self.first.stream
            return step
        if self.model is not None:
            step["model_name"] = self.model
        step["message"] = self.message or ""
        for key, value in (("reasoning_content", self.reasoning), ("tool_calls", self.calls or None),
                           ("observation", {"results": self.results} if self.results else None),
                           ("metrics", self.metrics), ("extra", self.extra or None)):
            if value is not None:
                step[key] = value
        return step


def trajectory_from_events(events: Iterable[StoredEvent | Sequence | Mapping], **given: Any) -> Trajectory:
    """An ATIF (:data:`LATEST`) trajectory of one trial's events: :func:`trajectory_dict`'s object,
    validated by the pydantic models. ``.to_json()`` gives the file, ``.to_json_dict()`` the
    JSON-ready dict (equal to :func:`trajectory_dict`'s)."""
    return Trajectory.model_validate(trajectory_dict(events, **given))


def trajectory_json(events: Iterable[StoredEvent | Sequence | Mapping], **given: Any) -> bytes:
    """The bytes of :func:`trajectory_from_events`'s ``.to_json()``, without building the models
    (for a site's thousands of files; a test keeps the two equal)."""
    return orjson.dumps(trajectory_dict(events, **given), option=orjson.OPT_INDENT_2)


def trajectory_dict(
    events: Iterable[StoredEvent | Sequence | Mapping],
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
    ``(seq, ts, kind, stream, text, data)`` or :class:`StoredEvent`. ``trial``: its row of the
    ``trials`` table, when there is one (suite, task, model, cli, token classes, cost...); the
    keyword arguments override what it says. ``usage``: the trial's five classes (for
    ``final_metrics``). ``usage_rows``: the ``usage`` table's rows by seq; without them each
    usage event's figures are read from its text. A trial without events yet gives one system
    step (ATIF requires at least one).
    """
    row = dict(trial or {})
    cli = agent_name or row.get("cli")
    items = list(events)
    if not all(isinstance(e, StoredEvent) for e in items):
        items = stored_events(items, usage_rows, row.get("cli") or agent_name)
    drafts: list[_Draft] = []
    for event in items:
        if usage_rows is None and event.kind == _USAGE and event.usage is None:
            event.usage = usage_from_text(event.text)
        slot = _SLOTS.get(event.kind)  # type: ignore[call-overload]
        if slot == 3 and event.usage is None:
            slot = None  # a usage note without figures: kept as a system step
        if slot is not None:
            if not drafts or not drafts[-1].accepts(slot):
                drafts.append(_Draft("agent", event))
            drafts[-1].add(event, slot)
        else:
            drafts.append(_Draft("system", event))
    if not drafts:
        drafts.append(_Draft("system", StoredEvent(0, None, EventKind.SYSTEM, None, "no transcript recorded")))
    steps = [d.step(i) for i, d in enumerate(drafts, start=1)]
    if usage is not None:
        row.update(usage.as_dict() if isinstance(usage, TokenUsage) else usage)
    if cost_usd is not None:
        row["cost_actual_usd"], row["cost_actual_source"] = cost_usd, cost_source or row.get("cost_actual_source")
    model = model_name if model_name is not None else row.get("model")
    agent = {"name": str(cli or "unknown"), "version": str(agent_version or row.get("cli_version") or "unknown")}
    if model is not None:
        agent["model_name"] = model
    trajectory = {"schema_version": LATEST, "session_id": session_id or _session_id(row), "agent": agent,
                  "steps": steps, "final_metrics": _final_metrics(row, len(steps))}
    if trial:
        trajectory["extra"] = {"agentmeter": _trial_extra(row)}
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
