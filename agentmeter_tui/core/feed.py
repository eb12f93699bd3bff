"""The live feed from a runner to its clients.

Trials append their new events to a per-trial buffer as output arrives; every ``TICK``
seconds the feed sends each subscriber one ``tick`` message with those events, the meters of
trials that changed, the trials that finished, and the progress. One message per tick, not
per event, keeps the cost flat however fast agents print. A subscriber whose socket backs up
(a stuck or dead client) is dropped: it can reconnect and reload history from the store.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from .control import encode

if TYPE_CHECKING:
    from .runner import Runner
    from .trial import TrialRun

TICK = 0.1
MAX_BACKLOG = 8 << 20  # bytes buffered for one client before it is considered gone


class Feed:
    def __init__(self, runner: Runner):
        self.runner = runner
        self.subscribers: set[asyncio.StreamWriter] = set()
        self._changed: dict[int, TrialRun] = {}
        self._finished: list[dict[str, Any]] = []
        self._final_events: dict[int, list] = {}  # the last events of trials that just finished
        self.done_before = 0

    # -- hooks from the scheduler and trials -----------------------------------------------

    def trial_changed(self, trial: TrialRun) -> None:
        self._changed[id(trial)] = trial

    def trial_finished(self, trial: TrialRun) -> None:
        self._finished.append(trial.meter())
        if trial.live and trial.id is not None:
            self._final_events[trial.id], trial.live = trial.live, []

    # -- views ------------------------------------------------------------------------------

    def progress(self) -> dict[str, Any]:
        scheduler = self.runner.scheduler
        if scheduler is None:
            return {}
        return {"done": self.done_before + scheduler.finished, "total": self.done_before + scheduler.total,
                "running": len(scheduler.running), "queued": len(scheduler.queue),
                "paused": not scheduler.paused.is_set(), "stopping": scheduler.stopping}

    def snapshot(self) -> dict[str, Any]:
        scheduler = self.runner.scheduler
        running = [t.meter() for t in scheduler.running.values() if t.id is not None] if scheduler else []
        return {"type": "snapshot", "run_id": self.runner.run_id, "suite": self.runner.suite.id,
                "db": str(self.runner.db), "pid": _pid(), "started": self.runner.started,
                "progress": self.progress(), "running": running}

    # -- delivery ---------------------------------------------------------------------------

    async def subscribe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Send the snapshot, then ticks until the client hangs up (or the run ends)."""
        writer.write(encode({"ok": True, **self.snapshot()}))
        self.subscribers.add(writer)
        self.runner.scheduler.ctx.live_enabled = True
        try:
            await writer.drain()
            while await reader.read(4096):
                pass  # a subscriber only listens; anything it sends is ignored
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.subscribers.discard(writer)

    def _broadcast(self, message: dict[str, Any]) -> None:
        data = encode(message)
        for writer in list(self.subscribers):
            transport = writer.transport
            if writer.is_closing() or transport.get_write_buffer_size() > MAX_BACKLOG:
                self.subscribers.discard(writer)
                writer.close()
                continue
            try:
                writer.write(data)
            except (ConnectionError, RuntimeError):
                self.subscribers.discard(writer)

    def _tick_message(self) -> dict[str, Any] | None:
        scheduler = self.runner.scheduler
        events: dict[int, list] = self._final_events
        self._final_events = {}
        meters = []
        for trial in list(scheduler.running.values()):
            if trial.id is None:
                continue
            if trial.live:
                events[trial.id], trial.live = trial.live, []
                meters.append(trial.meter())
            elif id(trial) in self._changed:
                meters.append(trial.meter())
        self._changed.clear()
        finished, self._finished = self._finished, []
        if not (events or meters or finished):
            return None
        return {"type": "tick", "ts": time.time(), "events": events, "meters": meters, "finished": finished,
                "progress": self.progress()}

    async def run(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            if not self.subscribers:
                # Nobody watching: stop buffering live copies of events (the store has them all).
                scheduler = self.runner.scheduler
                scheduler.ctx.live_enabled = False
                for trial in scheduler.running.values():
                    trial.live.clear()
                self._changed.clear()
                self._finished.clear()
                self._final_events.clear()
                continue
            try:
                message = self._tick_message()
                if message:
                    self._broadcast(message)
            except Exception as exc:  # the feed is a courtesy to clients: never let it stop the run
                self.runner.log(f"live feed error: {exc!r}")

    async def finish(self, status: str) -> None:
        message = self._tick_message()
        if message:
            self._broadcast(message)
        self._broadcast({"type": "finished", "status": status, "progress": self.progress()})
        for writer in list(self.subscribers):
            try:
                await asyncio.wait_for(writer.drain(), 2)
            except (TimeoutError, ConnectionError):
                pass
            writer.close()


def _pid() -> int:
    import os

    return os.getpid()
