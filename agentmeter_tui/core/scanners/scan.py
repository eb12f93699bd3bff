"""Running the scanners over a store: every finished trial not scanned yet is read once, its
findings stored as flags (``store.flags.record_scan``). A native trial is scanned as soon as its final
row is committed (``scan_finished``, on the runner's store writer thread, off the event loop),
an imported one at the end of its import (``interop/trials.py`` ``store_all``); ``agentmeter
scan`` picks up whatever neither reached (a store from before, a scanner added since)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..vocab import FINAL_STATUSES
from . import scanners
from .base import Event, Finding, Scanner, TrialView

BATCH = 200  # trials whose events are read in one query


@dataclass
class ScanOutcome:
    scanned: int = 0
    flagged: Counter = field(default_factory=Counter)  # scanner name -> trials flagged

    def summary(self) -> str:
        found = ", ".join(f"{name} {count}" for name, count in sorted(self.flagged.items())) or "no flags"
        return f"scanned {self.scanned} trial(s): {found}"


def view_of(row: dict, events: Sequence[tuple]) -> TrialView:
    """A trial row and its event rows ``(seq, ts, kind, stream, text, data)`` as scanners see them."""
    try:
        flags = tuple(json.loads(row.get("flags") or "[]"))
    except ValueError:
        flags = ()
    return TrialView(int(row["id"]), str(row["status"]), row.get("reason"), flags, row.get("error"),
                     tuple(Event(int(e[0]), str(e[2]), e[4] or "") for e in events))


def scan_trial(trial: TrialView, using: Sequence[Scanner]) -> list[Finding]:
    return [found for scanner in using if (found := scanner.scan(trial)) is not None]


def scan_store(store: Any, suite_id: str | None = None, names: list[str] | None = None) -> ScanOutcome:
    """Scan every finished trial of ``suite_id`` (all suites when None) not scanned yet."""
    using = scanners(names)
    return scan_ids(store, store.flags.unscanned(FINAL_STATUSES, suite_id), using)


def scan_finished(store: Any, trial_ids: Sequence[int]) -> ScanOutcome:
    """Scan trials whose final rows were just committed (the runner, on its writer thread),
    unless a scan already read them."""
    return scan_ids(store, store.flags.unscanned(FINAL_STATUSES, trial_ids=list(trial_ids)), scanners())


def scan_ids(store: Any, pending: Sequence[int], using: Sequence[Scanner]) -> ScanOutcome:
    """Scan the trials ``pending`` (ids) with ``using``, ``BATCH`` trials' events per query."""
    used = [s.name for s in using]
    outcome = ScanOutcome()
    for start in range(0, len(pending), BATCH):
        ids = pending[start:start + BATCH]
        rows = {row["id"]: row for row in store.trials(where="id in ({})".format(", ".join("?" * len(ids))),
                                                       params=ids)}
        events = dict(store.events_of(ids))
        scanned = [(trial_id, scan_trial(view_of(rows[trial_id], events.get(trial_id, [])), using)) for trial_id in ids]
        store.flags.record_scans(scanned, used)
        outcome.scanned += len(scanned)
        for _trial_id, findings in scanned:
            outcome.flagged.update(f.scanner for f in findings)
    return outcome


class ScanQueue:
    """Trials to scan once their final rows are committed (``TrialRun``), scanned on the run's
    store writer thread: not awaited, so neither the loop nor a trial's slot waits on them. Trials
    that end while a scan is queued join it: one query and one commit for them all. The writer
    runs every queued call before it closes."""

    def __init__(self) -> None:
        self.pending: list[int] = []
        self.lock = threading.Lock()  # add() runs on the loop's thread, _scan on the writer's

    def add(self, ctx: Any, trial_id: int) -> None:
        with self.lock:
            self.pending.append(trial_id)
            first = len(self.pending) == 1
        if first:
            ctx.writer.call(self._scan, ctx).add_done_callback(lambda f: self._failed(ctx, f))

    def _scan(self, store: Any, ctx: Any) -> ScanOutcome:
        with self.lock:
            ids, self.pending = self.pending, []
        return scan_finished(store, ids)

    @staticmethod
    def _failed(ctx: Any, future: Any) -> None:
        if (exc := future.exception()) is not None:
            ctx.log(f"the triage scan of finished trials failed: {exc!r}")


def queue_scan(ctx: Any, trial_id: int) -> None:
    """Queue ``trial_id`` on the run's :class:`ScanQueue` (made on first use)."""
    queue = ctx.scan_queue
    if queue is None:
        queue = ctx.scan_queue = ScanQueue()
    queue.add(ctx, trial_id)
