"""Two trials of one task side by side: their steps aligned, tokens per step, where they part.

A step is one tool call with its result (and the assistant text that led to it), or a
closing message or error. Steps are aligned by position (step n beside step n), which is what
a reader compares at a glance; the first position whose tool calls differ is the divergence.
Tokens come from the trial's usage records, each counted in the step it falls in, with a
running total. Repeats are what make a long failing trial expensive: a tool call the trial
already made, and a file it already read, are counted and highlighted.

One pass over each trial's events and usage rows, a range of seqs at a time, no per-step
query: the screen opens on the first ``CHUNK`` events of each (two million-event trials in
well under a second, benchmarks/compare.py) and reads the rest in the background.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..usage import TOKEN_CLASSES

LABEL_CHARS = 160
CHUNK = 16_384  # events of each trial read per range: the first is what the screen opens on
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
    total_tokens: int  # so far, until complete
    repeated_calls: int  # steps that repeat an earlier call
    reads: Counter = field(default_factory=Counter)  # path -> times read
    complete: bool = True  # False while the trial's later events are still being read

    @property
    def most_read(self) -> tuple[str, int] | None:
        return self.reads.most_common(1)[0] if self.reads else None


@dataclass
class Comparison:
    left: TrialSteps
    right: TrialSteps
    divergence: int | None  # index of the first step where the two differ; None: identical (so far)

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


class StepBuilder:
    """One trial's steps, built from its events a seq range at a time (``feed``), so a compare
    screen shows the first steps of a million-event trial at once and reads the rest after.

    A usage row counts in the step it falls in, which is known only once the next step has
    started: rows are kept until no later step can start before them (the start of a pending
    assistant message, else the end of what was read). Repeat counts depend only on earlier
    steps, so they are final when a step is made; tokens and running totals of the last steps
    may still grow until the next range is read.
    """

    def __init__(self, trial: dict[str, Any]):
        self.side = TrialSteps(trial, [], 0, 0, complete=False)
        self._pending: str | None = None  # assistant text not yet followed by a tool call
        self._pending_seq = 0
        self._usage: deque[tuple[int, int]] = deque()
        self._had_usage = False
        self._at = 0  # the step usage rows are being added to
        self._final = 0  # steps before this one have their final tokens and total
        self._running = 0  # tokens of the final steps
        self._calls: Counter = Counter()

    def _add(self, step: Step) -> None:
        side = self.side
        if step.kind == "tool":
            self._calls[step.signature] += 1
            step.repeat = self._calls[step.signature]
            side.repeated_calls += step.repeat > 1
        if step.read_path:
            side.reads[step.read_path] += 1
            step.read_repeat = side.reads[step.read_path]
        side.steps.append(step)

    def feed(self, rows: Iterable[tuple], usage: Iterable[tuple[int, int]], failures: set[int] | frozenset = frozenset(),
             through: int | None = None) -> None:
        """Add ``(seq, kind, text, data)`` rows in order and the ``(seq, tokens)`` usage rows of the
        same range; ``through``: the last seq this range covers (None: the trial's end, the
        steps are complete)."""
        steps = self.side.steps
        for seq, kind, text, data in rows:
            text = text or ""
            if kind == "tool_call":
                label = _one_line(text)
                self._add(Step(self._pending_seq if self._pending is not None else seq, "tool", label, label,
                               read_path=read_path(text, data)))
                self._pending = None
            elif kind == "tool_result":
                if steps and steps[-1].kind == "tool" and seq in failures:
                    steps[-1].failed = True
            elif kind == "assistant":
                if self._pending is None:
                    self._pending, self._pending_seq = text, seq
                elif len(self._pending) < LABEL_CHARS:
                    self._pending += text
            elif kind == "error":
                if self._pending is not None:
                    self._add(Step(self._pending_seq, "message", _one_line(self._pending), "message"))
                    self._pending = None
                self._add(Step(seq, "error", _one_line(text), "error: " + _one_line(text)[:40], failed=True))
        self._usage.extend(usage)
        self._had_usage = self._had_usage or bool(self._usage)
        if through is None and self._pending is not None:
            self._add(Step(self._pending_seq, "message", _one_line(self._pending), "message"))
            self._pending = None
        # Usage before ``bound`` cannot fall in a step not made yet.
        if through is None:
            bound = None
        else:
            bound = self._pending_seq if self._pending is not None else through + 1
        self._place_usage(bound)
        self._totals(bound)
        if through is None:
            side = self.side
            side.total_tokens = self._running if self._had_usage else sum(int(side.trial.get(k) or 0)
                                                                          for k in TOKEN_CLASSES)
            side.complete = True

    def _place_usage(self, bound: int | None) -> None:
        steps, usage = self.side.steps, self._usage
        if not steps:
            if bound is None:
                usage.clear()  # no step to count them in (the trial's totals stand instead)
            return
        count, at = len(steps), self._at
        while usage and (bound is None or usage[0][0] < bound):
            seq, tokens = usage.popleft()
            while at + 1 < count and steps[at + 1].seq <= seq:
                at += 1
            steps[at].tokens += tokens or 0
        self._at = at

    def _totals(self, bound: int | None) -> None:
        steps = self.side.steps
        running = self._running
        for index in range(self._final, len(steps)):
            step = steps[index]
            running += step.tokens
            step.total = running
            final = bound is None or (index + 1 < len(steps) and steps[index + 1].seq <= bound)
            if final and index == self._final:
                self._final, self._running = index + 1, running
        if not self.side.complete:
            self.side.total_tokens = running


def build_steps(trial: dict[str, Any], rows: Iterable[tuple], usage: list[tuple[int, int]],
                failures: set[int] | frozenset[int] = frozenset()) -> TrialSteps:
    """Steps from all of a trial's ``(seq, kind, text, data)`` rows in order, tokens from ``(seq,
    tokens)`` usage rows; ``failures``: seqs of failed tool results and errors (``store.views.failure_seqs``)."""
    builder = StepBuilder(trial)
    builder.feed(rows, usage, failures)
    return builder.side


def first_divergence(left: list[Step], right: list[Step], start: int = 0) -> int | None:
    for index in range(start, min(len(left), len(right))):
        if left[index].signature != right[index].signature:
            return index
    if len(left) != len(right):
        return min(len(left), len(right))
    return None


class ComparisonReader:
    """Reads two trials' steps ``chunk`` events of each at a time: ``open_comparison`` reads the
    first range (what a compare screen shows first), ``read_more`` the next, until both are
    complete. Each call is a few short queries, so the UI's store thread stays responsive; the
    steps lists only grow, so a view drawing them meanwhile sees a consistent prefix."""

    def __init__(self, store: Any, left_id: int, right_id: int, chunk: int):
        self.chunk = chunk
        self.sides: list[tuple[int, StepBuilder, int, int]] = []  # (trial id, builder, next seq, last seq)
        for trial_id in (left_id, right_id):
            trial = store.trial(trial_id)
            if trial is None:
                raise KeyError(f"no trial {trial_id}")
            self.sides.append((trial_id, StepBuilder(trial), store.reviews.first_seq(trial_id), store.views.last_seq(trial_id)))
        self._meters = [store.reviews.usage_meter(side[0]) for side in self.sides]
        self._starts = [side[2] for side in self.sides]
        left, right = (side[1].side for side in self.sides)
        self.comparison = Comparison(left, right, None)
        self._checked = 0  # step positions known to agree

    @property
    def complete(self) -> bool:
        return self.comparison.left.complete and self.comparison.right.complete

    def read_more(self, store: Any) -> bool:
        """Read the next range of each side not complete yet; True while more remains."""
        for index, (trial_id, builder, first, last) in enumerate(self.sides):
            if builder.side.complete:
                continue
            end = first + self.chunk - 1
            through = None if end >= last else end  # None: this range reaches the trial's end
            # The first range takes usage rows before the first event, the last those after the
            # last one (they count in the first and last step, as in one pass).
            start = None if first == self._starts[index] else first
            usage = store.reviews.step_usage(trial_id, start, through, self._meters[index])
            stop = last if through is None else end
            builder.feed(store.reviews.step_rows(trial_id, LABEL_CHARS, first, stop), usage,
                         store.views.failure_seqs(trial_id, first, stop), through)
            self.sides[index] = (trial_id, builder, stop + 1, last)
        self._find_divergence()
        return not self.complete

    def _find_divergence(self) -> None:
        comparison = self.comparison
        if comparison.divergence is not None:
            return
        left, right = comparison.left.steps, comparison.right.steps
        agreed = min(len(left), len(right))
        for index in range(self._checked, agreed):
            if left[index].signature != right[index].signature:
                comparison.divergence = index
                return
        self._checked = agreed
        if self.complete and len(left) != len(right):
            comparison.divergence = agreed


def open_comparison(store: Any, left_id: int, right_id: int, chunk: int = CHUNK) -> ComparisonReader:
    """Both trials' first ``chunk`` events read and aligned (``read_more`` reads on). Raises
    KeyError for an unknown trial."""
    reader = ComparisonReader(store, left_id, right_id, chunk)
    reader.read_more(store)
    return reader


def compare_trials(store: Any, left_id: int, right_id: int, chunk: int = CHUNK) -> Comparison:
    """Read both trials from ``store`` whole and align them. Raises KeyError for an unknown trial."""
    reader = open_comparison(store, left_id, right_id, chunk)
    while reader.read_more(store):
        pass
    return reader.comparison
