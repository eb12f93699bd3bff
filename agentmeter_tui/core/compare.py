"""Two trials of one task side by side: their steps aligned, tokens per step, where they part.

A step is one tool call with its result (and the assistant text that led to it), or a
closing message or error. Steps are aligned by position (step n beside step n), which is what
a reader compares at a glance; the first position whose tool calls differ is the divergence.
Tokens come from the trial's usage records, each counted in the step it falls in, with a
running total. Repeats are what make a long failing trial expensive: a tool call the trial
already made, and a file it already read, are counted and highlighted.

One pass over each trial's events and usage rows, no per-step query: two 50,000-event trials
build in well under a second (benchmarks/compare.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

LABEL_CHARS = 160
TOKEN_KEYS = ("uncached_input", "cached_input", "cache_write", "output", "reasoning")
# Shell commands that read a file, and the path they read (options skipped).
SHELL_READ = re.compile(r"^\s*(?:cat|head|tail|less|more|nl|bat|sed\s+-n\s+\S+)\s+(?:-\S+\s+(?:\d+\s+)?)*([^\s|;&<>]+)")
READ_TOOLS = ("read", "view", "open")
PATH_KEYS = ("file_path", "path", "absolute_path", "filename", "file")


@dataclass(slots=True)
class Step:
    seq: int  # the first event of the step
    kind: str  # "tool", "message" or "error"
    label: str  # the tool call (or message) on one line
    signature: str  # what makes two steps "the same" across trials and within one
    failed: bool = False
    read_path: str | None = None
    tokens: int = 0
    total: int = 0  # running total of tokens up to and including this step
    repeat: int = 1  # this is the n-th time the trial makes this very call
    read_repeat: int = 0  # this is the n-th read of read_path


@dataclass
class TrialSteps:
    trial: dict[str, Any]
    steps: list[Step]
    total_tokens: int
    repeated_calls: int  # steps that repeat an earlier call
    reads: Counter = field(default_factory=Counter)  # path -> times read

    @property
    def most_read(self) -> tuple[str, int] | None:
        return self.reads.most_common(1)[0] if self.reads else None


@dataclass
class Comparison:
    left: TrialSteps
    right: TrialSteps
    divergence: int | None  # index of the first step where the two differ; None: identical

    @property
    def rows(self) -> int:
        return max(len(self.left.steps), len(self.right.steps))


def _one_line(text: str) -> str:
    return " ".join(text.split())[:LABEL_CHARS]


def _tool_parts(text: str, data: str | bytes | None) -> tuple[str | None, dict[str, Any]]:
    """(tool name, arguments) from a tool call's raw line, where it is JSON that says so."""
    if not data:
        return None, {}
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None, {}
    if not isinstance(obj, dict):
        return None, {}
    name = obj.get("name") or obj.get("tool") or obj.get("tool_name")
    args = obj.get("arguments") or obj.get("input") or obj.get("args") or {}
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            args = {"command": args}
    return (str(name) if name else None), (args if isinstance(args, dict) else {})


def read_path(text: str, data: str | bytes | None) -> str | None:
    """The file a tool call reads: a read/view tool's path argument, or a shell ``cat``-like command."""
    match = SHELL_READ.match(text)
    if match:  # the common case, without parsing the raw line
        return match.group(1).strip("'\"")
    if not data:
        return None
    lowered = (data if isinstance(data, str) else data.decode("utf-8", "replace")).lower()
    if not any(word in lowered for word in READ_TOOLS):
        return None
    name, args = _tool_parts(text, data)
    if name and any(word in name.lower() for word in READ_TOOLS):
        for key in PATH_KEYS:
            if isinstance(args.get(key), str):
                return args[key]
    command = args.get("command") if isinstance(args.get("command"), str) else text
    if isinstance(command, list):
        command = " ".join(map(str, command))
    match = SHELL_READ.match(command or "")
    return match.group(1).strip("'\"") if match else None


def build_steps(trial: dict[str, Any], rows: Iterable[tuple], usage: list[tuple[int, int]],
                failures: set[int] = frozenset()) -> TrialSteps:
    """Steps from ``(seq, kind, text, data)`` rows in order, tokens from ``(seq, tokens)`` usage rows;
    ``failures``: seqs of failed tool results and errors (``Store.failure_seqs``)."""
    steps: list[Step] = []
    pending: str | None = None  # assistant text not yet followed by a tool call
    pending_seq = 0
    for seq, kind, text, data in rows:
        text = text or ""
        if kind == "tool_call":
            label = _one_line(text)
            steps.append(Step(pending_seq if pending is not None else seq, "tool", label, label,
                              read_path=read_path(text, data)))
            pending = None
        elif kind == "tool_result":
            if steps and steps[-1].kind == "tool" and seq in failures:
                steps[-1].failed = True
        elif kind == "assistant":
            if pending is None:
                pending, pending_seq = text, seq
            elif len(pending) < LABEL_CHARS:
                pending += text
        elif kind == "error":
            if pending is not None:
                steps.append(Step(pending_seq, "message", _one_line(pending), "message"))
                pending = None
            steps.append(Step(seq, "error", _one_line(text), "error: " + _one_line(text)[:40], failed=True))
    if pending is not None:
        steps.append(Step(pending_seq, "message", _one_line(pending), "message"))
    # Both lists are in seq order: one merge walk puts each usage row in the step it falls in.
    total, index, count = 0, 0, len(steps)
    for seq, tokens in usage if steps else ():
        while index + 1 < count and steps[index + 1].seq <= seq:
            index += 1
        steps[index].tokens += tokens or 0
    calls: Counter = Counter()
    reads: Counter = Counter()
    repeated = 0
    for step in steps:
        total += step.tokens
        step.total = total
        if step.kind == "tool":
            calls[step.signature] += 1
            step.repeat = calls[step.signature]
            repeated += step.repeat > 1
        if step.read_path:
            reads[step.read_path] += 1
            step.read_repeat = reads[step.read_path]
    if not usage:
        total = sum(int(trial.get(k) or 0) for k in TOKEN_KEYS)
    return TrialSteps(trial, steps, total, repeated, reads)


def first_divergence(left: list[Step], right: list[Step]) -> int | None:
    for index, (a, b) in enumerate(zip(left, right)):
        if a.signature != b.signature:
            return index
    if len(left) != len(right):
        return min(len(left), len(right))
    return None


def compare_trials(store: Any, left_id: int, right_id: int) -> Comparison:
    """Read both trials from ``store`` and align them. Raises KeyError for an unknown trial."""
    sides = []
    for trial_id in (left_id, right_id):
        trial = store.trial(trial_id)
        if trial is None:
            raise KeyError(f"no trial {trial_id}")
        sides.append(build_steps(trial, store.step_rows(trial_id, LABEL_CHARS), store.step_usage(trial_id),
                                 store.failure_seqs(trial_id)))
    left, right = sides
    return Comparison(left, right, first_divergence(left.steps, right.steps))
