"""The live feed from a runner to its clients.

The feed is the run's sink (:class:`~.context.RunSink`): trials hand it their new events as
output arrives and it keeps the newest of them per trial (text cut to ``LIVE_TEXT`` when
sent); every ``TICK`` seconds it sends each subscriber one ``tick`` message with those
events, the meters of trials that changed, the trials that finished, and the progress. One
message per tick, not per event, keeps the cost flat however fast agents print. The
messages' shapes are in ``control`` (:class:`~.control.Snapshot`, :class:`~.control.Tick`,
:class:`~.control.Finished`).

A trial's meter goes out in the next tick when its status, flags or budget changed, but when
it only printed (its token counts grew) at most every ``METER_EVERY`` seconds: with a thousand
trials printing, a meter per trial per tick was most of what a client parsed, for figures that
screens redraw about once a second anyway.

Live clients show transcript *tails*, so a tick carries at most ``max_events`` events per
trial (the newest) and says how many it ``skipped``; the store has all of them. The feed
itself keeps no more than the most a client may ask for (``MAX_LIVE`` per trial, in
:class:`Tail`): an agent that floods its output costs the runner a count, not a copy of every
line. A subscriber that asks ``events: false`` (the headless printer) gets meters and
progress only. A subscriber whose socket still backs up (a stuck or dead client) is dropped:
it can reconnect and reload history from the store.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter, deque
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol, cast

from .caps import against_forecast
from .control import LIVE_TEXT, Finished, LiveEvent, Meter, NodeState, Progress, Snapshot, Tick, encode
from .requests import RequestError, Subscribe, parse_request

if TYPE_CHECKING:
    from pathlib import Path

    from ..rows import EventRow
    from ..suites.suite import Suite
    from .caps import CapLedger
    from .forecast import RunForecast
    from .scheduler import Scheduler
    from .trialview import TrialView

# A tick's content: events and how many were left out, per trial id; meters; finished trials.
Collected = tuple[dict[int, list[LiveEvent]], dict[int, int], list[Meter], list[Meter]]

TICK = 0.1
METER_EVERY = 0.5  # seconds between two meters of a trial that only printed (its tokens grew)
MAX_BACKLOG = 8 << 20  # bytes buffered for one client before it is considered gone
DEFAULT_MAX_EVENTS = 200
MAX_LIVE = 5000  # the most events of one trial a tick can carry (a client's max_events at most)
NODES_EVERY = 1.0  # seconds between two reads of a fleet's nodes (a tick carries them when they changed)
PREPARED_KEPT = 500  # the preparation's latest lines a snapshot carries (a build's steps, image by image)


@dataclass(frozen=True)
class FeedOptions:
    events: bool = True
    max_events: int = DEFAULT_MAX_EVENTS

    @classmethod
    def from_request(cls, request: dict[str, Any]) -> FeedOptions:
        """The options of a ``subscribe`` request; a :class:`RequestError` when it is malformed."""
        parsed = parse_request(request)
        assert isinstance(parsed, Subscribe)  # the control server routes only subscribes here
        return cls(events=parsed.events, max_events=min(parsed.max_events or DEFAULT_MAX_EVENTS, MAX_LIVE))


class Tail:
    """A running trial's events not yet sent: its batches of rows as the trial emitted them,
    kept by reference (a copy of each row was most of the feed's cost under a flood), trimmed
    to those that hold the newest ``MAX_LIVE`` rows; ``dropped`` counts the rows trimmed."""

    __slots__ = ("batches", "count", "dropped")

    def __init__(self) -> None:
        self.batches: deque[list[EventRow]] = deque()
        self.count = 0  # rows in batches
        self.dropped = 0

    def add(self, rows: list[EventRow]) -> None:
        self.batches.append(rows)
        self.count += len(rows)
        while self.count - len(self.batches[0]) >= MAX_LIVE:
            oldest = self.batches.popleft()
            self.count -= len(oldest)
            self.dropped += len(oldest)

    def take(self) -> tuple[list[LiveEvent], int]:
        """The newest ``MAX_LIVE`` rows as live events (text cut to ``LIVE_TEXT``), and how
        many rows before them are left out."""
        rows = list(chain.from_iterable(self.batches))[-MAX_LIVE:]
        return ([(r[1], r[2], r[3], r[4], r[5][:LIVE_TEXT]) for r in rows],
                self.dropped + self.count - len(rows))


class FeedSource(Protocol):
    """What the feed reads of the run it reports (the :class:`~.runner.Runner`)."""

    scheduler: Scheduler | None
    run_id: int | None
    suite: Suite
    db: Path
    started: float
    early: dict[str, Any]
    caps: CapLedger
    forecast: RunForecast

    def log(self, text: str) -> None: ...


class Feed:
    def __init__(self, runner: FeedSource):
        self.runner = runner
        self.subscribers: dict[asyncio.StreamWriter, FeedOptions] = {}
        self._changed: dict[int, TrialView] = {}
        self._sent_state: tuple | None = None  # the schedule's state as last sent (``_schedule_state``)
        self._finished: list[Meter] = []
        self._done: list[Meter] = []  # every trial finished in this run, for clients that attach late
        self._live: dict[TrialView, Tail] = {}  # events not yet sent, per running trial
        self._final_events: dict[int, list[LiveEvent]] = {}  # the last events of trials that just finished
        self._final_dropped: dict[int, int] = {}
        self._meter_due: dict[TrialView, None] = {}  # printed since their last meter went out (ordered set)
        self._meter_sent: dict[TrialView, float] = {}  # monotonic time of each running trial's last meter
        self.live_enabled = True  # whether any subscriber wants events (else no live copies are kept)
        self.done_before = 0
        self.preparing: str | None = None  # what the runner does before the first trial (builds...)
        self.prepared: deque[str] = deque(maxlen=PREPARED_KEPT)  # its lines so far, for late followers
        self._nodes_sent: list[NodeState] = []
        self._nodes_at = 0.0  # monotonic time of the last read of the nodes

    # -- the run's sink: hooks from the scheduler and trials -------------------------------

    def trial_changed(self, trial: TrialView) -> None:
        self._changed[id(trial)] = trial

    def trial_events(self, trial: TrialView, rows: list[EventRow]) -> None:
        if not self.live_enabled or not rows:
            return
        tail = self._live.get(trial)
        if tail is None:
            tail = self._live[trial] = Tail()
        tail.add(rows)

    def trial_finished(self, trial: TrialView) -> None:
        self.runner.forecast.finished(trial)
        # The view cannot name Meter (sandboxes reach trialview, never the control socket's types).
        meter = cast(Meter, trial.meter())
        self._finished.append(meter)
        self._done.append(meter)
        self._meter_due.pop(trial, None)
        self._meter_sent.pop(trial, None)
        tail = self._live.pop(trial, None)
        if tail is not None and trial.id is not None:
            self._final_events[trial.id], dropped = tail.take()
            if dropped:
                self._final_dropped[trial.id] = dropped

    # -- views ------------------------------------------------------------------------------

    def prepare(self, text: str) -> None:
        """Before the schedule exists: say what the runner is doing (a ``preparing`` message to
        every subscriber, and ``progress.preparing`` in snapshots)."""
        self.preparing = text
        self.prepared.append(text)
        message = encode({"type": "preparing", "text": text})
        self._broadcast({options: message for options in set(self.subscribers.values())})

    def progress(self) -> Progress:
        scheduler = self.runner.scheduler
        if scheduler is None:
            return {"preparing": self.preparing or "", "paused": bool(self.runner.early.get("paused")),
                    "done": self.done_before, "total": self.done_before, "running": 0, "queued": 0,
                    "caps": self.runner.caps.status()}
        forecast = {k: v for k, v in self.runner.forecast.project(scheduler, self.runner.caps).items() if k != "cells"}
        return {"done": self.done_before + scheduler.done, "total": self.done_before + scheduler.total,
                "running": len(scheduler.running), "queued": len(scheduler.queue),
                "paused": not scheduler.paused.is_set(), "stopping": scheduler.stopping,
                "held": sorted(scheduler.holds.values()),
                "cap_held": scheduler.holds.get("cap"),  # a cap holds the schedule: why (`--wait-cap`, headless)
                "caps": against_forecast(self.runner.caps.status(), forecast, self.runner.suite),
                "paused_models": sorted(scheduler.paused_models), "paused_clis": sorted(scheduler.paused_clis),
                "forecast": forecast}

    def snapshot(self) -> Snapshot:
        scheduler = self.runner.scheduler
        running = [t.meter() for t in scheduler.running.values() if t.id is not None] if scheduler else []
        return {"type": "snapshot", "run_id": self.runner.run_id, "suite": self.runner.suite.id,
                "db": str(self.runner.db), "pid": os.getpid(), "started": self.runner.started,
                "progress": self.progress(), "running": running, "subscribers": len(self.subscribers),
                "done": list(self._done), "nodes": self.nodes(),
                "forecast_cells": self.runner.forecast.project(scheduler, self.runner.caps)["cells"] if scheduler else {},
                # a follower that came during the preparation sees its steps from the start
                "prepared": [] if scheduler else list(self.prepared)}

    def nodes(self) -> list[NodeState]:
        """A fleet's nodes with the slots each holds now (running trials placed there)."""
        sandbox, scheduler = getattr(self.runner, "_sandbox", None), self.runner.scheduler
        if sandbox is None or scheduler is None:
            return []
        busy = Counter(t.session.slot.node for t in scheduler.running.values() if t.session is not None)
        return [{"name": n["name"], "state": n["state"], "running": busy[n["name"]], "slots": n.get("slots", 0),
                 "seen": n.get("seen")} for n in sandbox.fleet_nodes()]

    def _nodes_news(self) -> list[NodeState] | None:
        """The nodes, when they changed since the last tick that carried them (read at most
        every ``NODES_EVERY``: a fleet view needs no more, and a run without nodes pays nothing)."""
        if time.monotonic() - self._nodes_at < NODES_EVERY:
            return None
        self._nodes_at = time.monotonic()
        nodes = self.nodes()
        if nodes == self._nodes_sent:
            return None
        self._nodes_sent = nodes
        return nodes

    async def _read_nodes(self) -> None:
        """Keep a fleet's node list fresh for its viewers while no job watcher reads it (an idle
        or paused run): a node that stops answering shows down, and its last-seen time ages.
        Apart from the ticks, so a manager slow to answer never holds them up."""
        while True:
            await asyncio.sleep(NODES_EVERY)
            sandbox = getattr(self.runner, "_sandbox", None)
            if sandbox is None or not self.subscribers or not sandbox.fleet_nodes():
                continue
            try:
                await sandbox.read_nodes()
            except Exception:  # noqa: BLE001 -- a manager that does not answer: the job watchers say so
                pass

    # -- delivery ---------------------------------------------------------------------------

    async def subscribe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        request: dict[str, Any]) -> None:
        """Send the snapshot, then ticks until the client hangs up (or the run ends)."""
        try:
            options = FeedOptions.from_request(request)
        except RequestError as exc:
            writer.write(encode({"ok": False, "error": str(exc)}))
            return
        writer.write(encode({"ok": True, **self.snapshot()}))
        self.subscribers[writer] = options
        if options.events:
            self.live_enabled = True
        try:
            await writer.drain()
            while await reader.read(4096):
                pass  # a subscriber only listens; anything it sends is ignored
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.subscribers.pop(writer, None)

    def _broadcast(self, messages: dict[FeedOptions, bytes]) -> None:
        for writer, options in list(self.subscribers.items()):
            if writer.is_closing() or writer.transport.get_write_buffer_size() > MAX_BACKLOG:
                self.subscribers.pop(writer, None)
                writer.close()
                continue
            try:
                writer.write(messages[options])
            except (ConnectionError, RuntimeError):
                self.subscribers.pop(writer, None)

    def _collect(self) -> Collected | None:
        scheduler = self.runner.scheduler
        if scheduler is None:  # no trial has started: nothing to collect
            return None
        events: dict[int, list[LiveEvent]] = self._final_events
        dropped: dict[int, int] = self._final_dropped
        self._final_events, self._final_dropped = {}, {}
        meters: list[Meter] = []
        now = time.monotonic()
        for trial in list(scheduler.running.values()):
            if trial.id is None:
                continue
            tail = self._live.pop(trial, None)
            if tail is not None:
                events[trial.id], left_out = tail.take()
                if left_out:
                    dropped[trial.id] = left_out
            printed = tail is not None or trial in self._meter_due
            if id(trial) in self._changed or (printed and now - self._meter_sent.get(trial, -METER_EVERY) >= METER_EVERY):
                meters.append(cast(Meter, trial.meter()))  # see trial_finished
                self._meter_sent[trial] = now
                self._meter_due.pop(trial, None)
            elif tail is not None:
                self._meter_due[trial] = None
        self._changed.clear()
        finished, self._finished = self._finished, []
        if not (events or meters or finished):
            return None
        return events, dropped, meters, finished

    def _encode(self, collected: Collected, nodes: list[NodeState] | None = None) -> dict[FeedOptions, bytes]:
        events, dropped, meters, finished = collected
        base: Tick = {"type": "tick", "ts": time.time(), "meters": meters, "finished": finished,
                      "progress": self.progress()}
        if nodes is not None:
            base["nodes"] = nodes
        out = {}
        for options in set(self.subscribers.values()):
            message = base.copy()
            if options.events:
                cap = options.max_events
                message["events"] = {tid: rows[-cap:] for tid, rows in events.items()}
                skipped = {tid: max(0, len(rows) - cap) + dropped.get(tid, 0) for tid, rows in events.items()
                           if len(rows) > cap or tid in dropped}
                if skipped:
                    message["skipped"] = skipped
            out[options] = encode(message)
        return out

    async def run(self) -> None:
        reader = asyncio.create_task(self._read_nodes())
        try:
            while True:
                await asyncio.sleep(TICK)
                try:
                    self._tick()
                except Exception as exc:  # the feed is a courtesy to clients: never let it stop the run
                    self.runner.log(f"live feed error: {exc!r}")
        finally:
            reader.cancel()

    def _tick(self) -> None:
        self.live_enabled = any(o.events for o in self.subscribers.values())
        if not self.live_enabled:
            # Nobody watching transcripts: stop buffering live copies (the store has them all).
            self._live.clear()
            self._final_events.clear()
            self._final_dropped.clear()
        if not self.subscribers:
            self._changed.clear()
            self._finished.clear()
            return
        collected = self._collect()
        nodes = self._nodes_news() if self.runner.scheduler is not None else None
        state = self._schedule_state()
        if not collected and (state != self._sent_state or nodes is not None):
            collected = ({}, {}, [], [])  # a hold, a raised cap, a pause, a node's news with no trial news: say it still
        if collected:
            self._sent_state = state
            self._broadcast(self._encode(collected, nodes))

    def _schedule_state(self) -> tuple | None:
        """What of the progress can change while no trial moves (a cap reached on start, a raise,
        a pause, a rerun queued), cheap to compare every tick."""
        scheduler = self.runner.scheduler
        if scheduler is None:
            return None
        caps = tuple(sorted((scope, cap.usd, cap.tokens) for scope, cap in self.runner.caps.caps.items()))
        return (tuple(sorted(scheduler.holds.values())), scheduler.paused.is_set(), scheduler.stopping,
                tuple(sorted(scheduler.paused_models)), tuple(sorted(scheduler.paused_clis)),
                scheduler.total, len(scheduler.queue), caps)

    async def finish(self, status: str, error: str | None = None) -> None:
        collected = self._collect() if self.subscribers and self.runner.scheduler else None
        if collected:
            self._broadcast(self._encode(collected))
        finished: Finished = {"type": "finished", "status": status, "progress": self.progress()}
        if error:
            finished["error"] = error
        done = encode(finished)
        self._broadcast({options: done for options in set(self.subscribers.values())})
        for writer in list(self.subscribers):
            try:
                await asyncio.wait_for(writer.drain(), 2)
            except (TimeoutError, ConnectionError):
                pass
            writer.close()
