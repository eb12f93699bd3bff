"""A trial's stored event rows grouped into ATIF steps, as the JSON objects of the steps.

An agent step holds, in this order, at most one reasoning text, one assistant text, one usage
figure (the metrics), any number of tool calls and their results (the observation); an event
that would go back in that order opens the next step, so reading the steps back in that order
gives the events in their stored order. Every other event (system and runner notes, errors, raw
lines) is a system step of its own whose ``extra.agentmeter_kind`` says what it was.

The rows become step objects in one pass, with no object per event: a site writes thousands of
trajectories of hundreds of events, and an event object per row, filled in three passes, was
most of its ATIF time. The objects are what ``Trajectory.to_json_dict`` gives (fields in the
models' order, no null); the models validate them in :func:`~.atif.trajectory_from_events`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, NamedTuple

import orjson

from ..harnesses.jsonl import tool_text
from ..usage import USAGE_TEXT, TokenUsage
from ..vocab import EventKind
from .atif_read import split_tool_key

# Slots of an agent step, in the order the step is read back.
_SLOTS: dict[str, int] = {EventKind.REASONING: 1, EventKind.ASSISTANT: 2, EventKind.USAGE: 3, EventKind.TOOL_CALL: 4,
          EventKind.TOOL_RESULT: 5}
_USAGE = EventKind.USAGE.value  # a plain str: the enum's attribute costs more than the compare, per event
PARSER_STREAMS = ("stdout", "stderr")  # events a CLI's parser made from its output lines
Row = tuple  # (seq, ts, kind, stream, text, data), as ``Store.events`` yields them
Figures = tuple[int, int, int, int, int]  # uncached input, cached input, cache write, output, reasoning


def rows_of(events: Iterable[Sequence | Mapping]) -> list[Row]:
    """Event rows as tuples (a store's rows already are)."""
    rows = []
    for row in events:
        if type(row) is not tuple:
            row = (row["seq"], row.get("ts"), row["kind"], row.get("stream"), row.get("text") or "", row.get("data")) \
                if isinstance(row, Mapping) else tuple(row)
        rows.append(row)
    return rows


def metrics_for(figures: Figures, cost_usd: float | None = None) -> dict[str, Any]:
    """ATIF metrics of one usage figure, as the JSON object (fields in the model's order)."""
    uncached, cached, write, output, reasoning = figures
    metrics: dict[str, Any] = {"prompt_tokens": uncached + cached + write, "completion_tokens": output + reasoning,
                               "cached_tokens": cached}
    if cost_usd is not None:
        metrics["cost_usd"] = float(cost_usd)
    metrics["extra"] = {"cache_creation_input_tokens": write, "reasoning_output_tokens": reasoning}
    return metrics


def _usage(found: Mapping | Sequence) -> tuple[Figures, Any, Any]:
    """(figures, cost, model) of a usage row: a ``usage`` table row, or a tuple of the five classes."""
    if type(found) is dict or isinstance(found, Mapping):
        get = found.get
        return ((int(get("uncached_input") or 0), int(get("cached_input") or 0), int(get("cache_write") or 0),
                 int(get("output") or 0), int(get("reasoning") or 0)), get("cost_usd"), get("model"))
    return TokenUsage(*found[:5]).as_tuple(), None, None


def _reparsed(rows: list[Row], cli: str) -> dict[int, tuple]:
    """Tool names and arguments of a native trial, by row index ``(model, is_error, tool name,
    arguments)``: the stored raw lines are fed again through a fresh parser of the trial's CLI
    (deterministic), and the events it makes are matched to the stored rows that line produced
    (the raw line is stored with the first of them)."""
    from ..harnesses import ADAPTERS, get_adapter

    found: dict[int, tuple] = {}
    if cli not in ADAPTERS:
        return found
    feed = get_adapter(cli).new_parser().feed
    count = len(rows)
    i = 0
    while i < count:
        _seq, _ts, _kind, stream, _text, data = rows[i]
        if stream not in PARSER_STREAMS or data is None:
            i += 1
            continue
        j = i
        for item in feed(stream, data.encode() if isinstance(data, str) else bytes(data)):  # parsers never raise
            if j >= count:
                break
            row = rows[j]
            if row[3] != stream or str(row[2]) != item.kind or (j > i and row[5] is not None):
                break
            name = arguments = None
            if item.kind == EventKind.TOOL_CALL and item.tool_key:
                name, arguments = split_tool_key(item.tool_key, item.tool_name)
            found[j] = (item.model or None, item.is_error, name, arguments)
            j += 1
        i = max(j, i + 1)
    return found


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


def _step(step_id: int, ts: Any, source: str) -> dict[str, Any]:
    step: dict[str, Any] = {"step_id": step_id}
    timestamp = _iso(ts)
    if timestamp is not None:
        step["timestamp"] = timestamp
    step["source"] = source
    return step


def _agent_step(step_id: int, ts: Any, model: Any, message: str | None, reasoning: str | None,
                calls: list[dict[str, Any]], results: list[dict[str, Any]], metrics: dict[str, Any] | None,
                extra: dict[str, Any] | None) -> dict[str, Any]:
    step = _step(step_id, ts, "agent")
    if model is not None:
        step["model_name"] = model
    step["message"] = message or ""
    if reasoning is not None:
        step["reasoning_content"] = reasoning
    if calls:
        step["tool_calls"] = calls
    if results:
        step["observation"] = {"results": results}
    if metrics is not None:
        step["metrics"] = metrics
    if extra:
        step["extra"] = extra
    return step


class _OpenStep:
    """The agent step being filled: rows join it in slot order (reasoning, message, usage,
    tool calls, their results) until a row's slot says a new step begins."""

    __slots__ = ("ts", "model", "message", "reasoning", "metrics", "extra", "calls", "results")

    def __init__(self, ts: Any):
        self.ts, self.model = ts, None
        self.message: str | None = None
        self.reasoning: str | None = None
        self.metrics: dict[str, Any] | None = None
        self.extra: dict[str, Any] | None = None
        self.calls: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []

    def step(self, step_id: int) -> dict[str, Any]:
        return _agent_step(step_id, self.ts, self.model, self.message, self.reasoning, self.calls, self.results,
                           self.metrics, self.extra)

    def take(self, slot: int, seq: Any, text: str, meta: _RowMeta, figures: Any, cost: Any) -> None:
        if slot == 4:
            self._call(seq, text, meta)
        elif slot == 5:
            self._result(text, meta)
        elif slot == 2:
            self.message = text
            if text == "":
                self.extra = {"agentmeter_empty_message": True}
        elif slot == 1:
            self.reasoning = text
        else:
            if not sum(figures):
                figures = (0, 0, 0, 0, 0)  # as a TokenUsage of no raw tokens reads (``usage or TokenUsage()``)
            self.metrics = metrics_for(figures, cost)
            if text != USAGE_TEXT.format(*figures):
                self.metrics["extra"]["agentmeter_text"] = text

    def _call(self, seq: Any, text: str, meta: _RowMeta) -> None:
        call = {"tool_call_id": meta.call_id or f"call_{int(seq)}", "function_name": meta.tool_name or "tool",
                "arguments": {"input": text} if meta.arguments is None else meta.arguments}
        # Without arguments the text is kept twice: tool_text({"input": text}) is that object's
        # JSON, longer than the text, so never equal to it.
        if meta.arguments is None or tool_text(meta.arguments) != text:
            call["extra"] = {"agentmeter_text": text}
        self.calls.append(call)

    def _result(self, text: str, meta: _RowMeta) -> None:
        at, call_id = len(self.results), meta.call_id
        if not (call_id and any(c["tool_call_id"] == call_id for c in self.calls)):
            call_id = self.calls[at]["tool_call_id"] if at < len(self.calls) else None
        result: dict[str, Any] = {"content": text} if call_id is None else {"source_call_id": call_id,
                                                                             "content": text}
        if meta.is_error:
            result["extra"] = {"is_error": True}
        self.results.append(result)


class _RowMeta(NamedTuple):
    """What a row says of itself beyond its text."""
    model: Any = None
    is_error: bool = False
    tool_name: str | None = None
    arguments: dict | None = None
    call_id: str | None = None


def _row_meta(stream: Any, data: Any, again: Any) -> _RowMeta:
    """An imported event keeps tool name, arguments, call id and model as a JSON object in
    ``data``; a native one has them from its CLI's parser (``again``, the row reparsed)."""
    if stream in PARSER_STREAMS:
        return _RowMeta() if again is None else _RowMeta(again[0], again[1], again[2], again[3])
    if not data:
        return _RowMeta()
    try:
        meta = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _RowMeta()
    if not isinstance(meta, dict):
        return _RowMeta()
    get = meta.get
    return _RowMeta(get("model") if isinstance(get("model"), str) else None, bool(get("is_error")),
                    get("tool_name") if isinstance(get("tool_name"), str) else None,
                    get("arguments") if isinstance(get("arguments"), dict) else None,
                    get("call_id") if isinstance(get("call_id"), str) else None)


def _usage_of(seq: Any, text: str, usage_rows: Mapping[int, Mapping | Sequence] | None,
              from_text: Any) -> tuple[Any, Any, Any]:
    """A usage event's figures, cost and model: from the usage table's row, else (no table
    given) read from its text; figures None: a usage note without figures."""
    found = (usage_rows or {}).get(int(seq))
    if found is not None:
        return _usage(found)
    if usage_rows is None and (parsed := from_text(text)) is not None:
        return parsed.as_tuple(), None, None
    return None, None, None


def _system_step(step_id: int, ts: Any, kind: str, stream: Any, text: str) -> dict[str, Any]:
    step = _step(step_id, ts, "system")
    step["message"] = text
    step["extra"] = {"agentmeter_kind": kind, "agentmeter_stream": stream} if stream else {"agentmeter_kind": kind}
    return step


def steps_of(rows: list[Row], usage_rows: Mapping[int, Mapping | Sequence] | None, cli: str | None,
             from_text: Any) -> list[dict[str, Any]]:
    """The steps of ``rows``. ``usage_rows``: the ``usage`` table's rows by seq; None: each usage
    event's figures are read from its text by ``from_text`` (text -> TokenUsage or None)."""
    reparsed = _reparsed(rows, cli) if cli else {}
    steps: list[dict[str, Any]] = []
    slot_at = _SLOTS.get
    open_slot, open_step = 0, None  # the slot last filled in the open agent step; 0: none is open
    for index, (seq, ts, kind, stream, text, data) in enumerate(rows):
        kind, text = str(kind), text or ""
        slot = slot_at(kind)
        found_model = cost = figures = None
        if kind == _USAGE:
            figures, cost, found_model = _usage_of(seq, text, usage_rows, from_text)
            if figures is None:
                slot = None  # a usage note without figures: kept as a system step
        if slot is None:
            if open_step is not None:
                steps.append(open_step.step(len(steps) + 1))
                open_slot, open_step = 0, None
            steps.append(_system_step(len(steps) + 1, ts, kind, stream, text))
            continue
        if open_step is None or slot < open_slot or (slot == open_slot and slot < 4):  # it cannot take the row
            if open_step is not None:
                steps.append(open_step.step(len(steps) + 1))
            open_step = _OpenStep(ts)
        open_slot = slot
        meta = _row_meta(stream, data, reparsed.get(index))
        open_step.model = open_step.model or (found_model if found_model is not None else meta.model)
        open_step.take(slot, seq, text, meta, figures, cost)
    if open_step is not None:
        steps.append(open_step.step(len(steps) + 1))
    if not steps:  # ATIF requires a step
        steps.append({"step_id": 1, "source": "system", "message": "no transcript recorded",
                      "extra": {"agentmeter_kind": EventKind.SYSTEM.value}})
    return steps
