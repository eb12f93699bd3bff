"""Provides :class:`LiveState`: what the runner's feed has said so far, kept for the screens.

The feed (``core/run/feed.py``) sends a snapshot and then a tick about every 100 ms with the new
events of each running trial and the meters that changed. The model applies those messages
in O(events) and remembers only a bounded tail per trial, so memory stays flat however long
a run lasts; screens read it at their own pace. No Textual here: tests feed it dicts (the
messages' shapes are ``core.run.control``'s ``Snapshot``, ``Tick`` and ``Finished``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..core.run.control import FeedMessage, LiveEvent, Meter, NodeState, Progress, Snapshot, Tick
from ..core.vocab import FINAL_STATUSES
from .format import meter_fresh

TAIL = 400  # events kept per running trial for its pane; older ones are in the store
BURN_WINDOW = 60.0  # seconds over which burn rates are measured


@dataclass
class TrialLive:
    """One running (or just finished) trial as the feed describes it."""

    id: int  # its meter's id: a meter without one (a trial not in the store yet) makes no TrialLive
    meter: Meter
    received: float  # wall time the meter arrived; elapsed advances from here between ticks
    events: deque = field(default_factory=lambda: deque(maxlen=TAIL))
    samples: deque = field(default_factory=lambda: deque(maxlen=256))  # (ts, fresh tokens, usd)
    last_seq: int = 0

    @property
    def finished(self) -> bool:
        return self.meter.get("status") in FINAL_STATUSES

    def add_events(self, rows: Iterable[LiveEvent]) -> int:
        """Append ``[seq, ts, kind, stream, text]`` rows not seen yet; return how many.

        Kept as tuples: a tuple of plain values drops out of the garbage collector's view,
        and a tail of thousands of lists would make every full collection a visible pause.
        """
        added = 0
        for row in rows:
            if row[0] > self.last_seq:
                self.events.append(tuple(row))
                self.last_seq = row[0]
                added += 1
        return added

    def since(self, seq: int) -> list[list]:
        """Events after ``seq``, oldest first (a pane asks for what it has not drawn)."""
        out = []
        for row in reversed(self.events):
            if row[0] <= seq:
                break
            out.append(row)
        out.reverse()
        return out

    def set_meter(self, meter: Meter, ts: float) -> None:
        self.meter, self.received = meter, ts
        self.samples.append((ts, meter_fresh(meter), meter.get("cost_usd") or 0.0))

    def elapsed(self, now: float) -> float | None:
        base = self.meter.get("elapsed")
        if base is None:
            return None
        return base + (max(0.0, now - self.received) if not self.finished else 0.0)

    def burn(self) -> tuple[float | None, float | None]:
        """(fresh tokens per minute, USD per minute) over the last ``BURN_WINDOW`` seconds."""
        if len(self.samples) < 2:
            return None, None
        last = self.samples[-1]
        first = self.samples[0]
        for sample in self.samples:
            if last[0] - sample[0] <= BURN_WINDOW:
                first = sample
                break
        span = last[0] - first[0]
        if span <= 0:
            return None, None
        return (last[1] - first[1]) * 60 / span, (last[2] - first[2]) * 60 / span


@dataclass
class TickSummary:
    """What one feed message changed, so screens redraw only that."""

    changed: set[int] = field(default_factory=set)  # trials with new events or meters
    started: set[int] = field(default_factory=set)
    finished: list[Meter] = field(default_factory=list)
    events: int = 0


def skipped_marker(first: LiveEvent, count: int) -> LiveEvent:
    """A tail line where the feed left events out (a trial printing faster than a pane can
    show): it says how many, in place of the last of them, so a tail never skips silently."""
    return (first[0] - 1, first[1], "status", "runner",
            f"… {count:,} events not shown live (every one is stored; review shows them)")


PREPARED_KEPT = 50  # preparation lines kept: the build's progress needs the last few


class LiveState:
    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.trials: dict[int, TrialLive] = {}
        self.progress: Progress = {}
        self.run_id: int | None = None
        self.suite: str | None = None
        self.runner_pid: int | None = None
        self.connected = False
        self.ended: str | None = None  # "finished", "stopped" or "lost" once the feed ends
        self.events_seen = 0
        self.nodes: list[NodeState] = []  # a fleet's nodes as the runner last sent them ([]: no fleet)
        self.prepared: list[str] = []  # the runner's preparation lines (image builds) before its first trial

    # -- applying feed messages ----------------------------------------------------------------

    def apply(self, message: FeedMessage) -> TickSummary:
        if message["type"] == "snapshot":
            return self.apply_snapshot(message)
        if message["type"] == "tick":
            return self.apply_tick(message)
        if message["type"] == "preparing":  # before the first trial: what the runner is doing (image builds)
            text = message.get("text") or ""
            self.progress = {**self.progress, "preparing": text}
            self.prepared = [*self.prepared[-(PREPARED_KEPT - 1):], text]
        if message["type"] == "finished":
            self.progress = message.get("progress") or self.progress
            self.ended = message.get("status", "finished")
        return TickSummary()

    def apply_snapshot(self, message: Snapshot) -> TickSummary:
        self.run_id, self.suite = message.get("run_id"), message.get("suite")
        self.runner_pid = message.get("pid")
        self.progress = message.get("progress") or {}
        self.connected, self.ended = True, None
        self.nodes = message.get("nodes") or []
        self.prepared = [str(t) for t in message.get("prepared") or ()][-PREPARED_KEPT:]
        summary = TickSummary()
        ts = self.clock()
        for meter in message.get("running") or ():
            if meter["id"] is not None:  # one without is left out, as _meter leaves it
                summary.started.add(meter["id"])
            # No burn-rate sample: a snapshot carries no time of its own to measure a rate against.
            self._meter(meter, ts, summary, sample=False)
        return summary

    def apply_tick(self, message: Tick) -> TickSummary:
        summary = TickSummary()
        ts = message.get("ts") or self.clock()
        for meter in message.get("meters") or ():
            self._meter(meter, ts, summary)
        skipped = message.get("skipped") or {}
        for key, rows in (message.get("events") or {}).items():
            trial = self.trials.get(int(key))
            if trial is None:
                continue  # events of a trial we have no meter for yet come again with it
            if skipped.get(key) and rows:
                rows = [skipped_marker(rows[0], skipped[key]), *rows]
            added = trial.add_events(rows)
            if added:
                summary.events += added
                summary.changed.add(trial.id)
        for meter in message.get("finished") or ():
            if meter.get("id") is None:
                continue
            self._meter(meter, ts, summary)
            summary.finished.append(meter)
        self.events_seen += summary.events
        if message.get("progress"):
            self.progress = message["progress"]
        if "nodes" in message:  # sent only when they changed
            self.nodes = message["nodes"]
        return summary

    def _meter(self, meter: Meter, ts: float, summary: TickSummary, sample: bool = True) -> None:
        trial_id = meter.get("id")
        if trial_id is None:
            return
        trial = self.trials.get(trial_id)
        if trial is None:
            trial = self.trials[trial_id] = TrialLive(trial_id, meter, ts)
            summary.started.add(trial_id)
        if sample:
            trial.set_meter(meter, ts)
        else:
            trial.meter, trial.received = meter, ts
        summary.changed.add(trial_id)

    def settle(self, final: dict[int, tuple[str, str | None]]) -> TickSummary:
        """Trials the store has final (``final``: id -> status, reason) that the feed left
        running here: they end now, as if their finished meter had come."""
        summary = TickSummary()
        for trial_id, (status, reason) in final.items():
            trial = self.trials.get(trial_id)
            if trial is not None and not trial.finished:
                meter: Meter = {**trial.meter, "status": status, "reason": reason, "elapsed": None}
                trial.meter = meter
                summary.changed.add(trial_id)
                summary.finished.append(meter)
        return summary

    # -- views ---------------------------------------------------------------------------------

    def running(self) -> list[TrialLive]:
        """Trials still running, in start order (trial ids grow as trials start)."""
        return sorted((t for t in self.trials.values() if not t.finished), key=lambda t: t.id)

    def forget(self, trial_id: int) -> None:
        """Drop a finished trial's tail once no pane shows it (the store has it all)."""
        trial = self.trials.get(trial_id)
        if trial is not None and trial.finished:
            del self.trials[trial_id]

    def totals(self) -> dict[str, float]:
        """Fresh tokens per minute and USD per minute summed over the running trials."""
        tok = cost = 0.0
        for trial in self.trials.values():
            if trial.finished:
                continue
            rate, usd_rate = trial.burn()
            tok += rate or 0.0
            cost += usd_rate or 0.0
        return {"tokens_per_min": tok, "usd_per_min": cost}
