"""Running the scanners over a store: every finished trial not scanned yet is read once, its
findings stored as flags (``Store.record_scan``). A native trial is scanned as soon as its final
row is committed (``scan_finished``, on the runner's store writer thread, off the event loop),
an imported one at the end of its import (``interop/trials.py`` ``store_all``); ``agentmeter
scan`` picks up whatever neither reached (a store from before, a scanner added since)."""

from __future__ import annotations

import json
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
    return scan_ids(store, store.unscanned(FINAL_STATUSES, suite_id), using)


def scan_finished(store: Any, trial_id: int) -> ScanOutcome:
    """Scan one trial whose final row was just committed (the runner, on its writer thread),
    unless a scan already read it."""
    return scan_ids(store, store.unscanned(FINAL_STATUSES, trial_ids=[trial_id]), scanners())


def scan_ids(store: Any, pending: Sequence[int], using: Sequence[Scanner]) -> ScanOutcome:
    """Scan the trials ``pending`` (ids) with ``using``, ``BATCH`` trials' events per query."""
    used = [s.name for s in using]
    outcome = ScanOutcome()
    for start in range(0, len(pending), BATCH):
        ids = pending[start:start + BATCH]
        rows = {row["id"]: row for row in store.trials(where="id in ({})".format(", ".join("?" * len(ids))),
                                                       params=ids)}
        events = dict(store.events_of(ids))
        for trial_id in ids:
            findings = scan_trial(view_of(rows[trial_id], events.get(trial_id, [])), using)
            store.record_scan(trial_id, findings, used)
            outcome.scanned += 1
            outcome.flagged.update(f.scanner for f in findings)
    return outcome


def queue_scan(ctx: Any, trial_id: int) -> None:
    """Scan a trial whose final row is committed (``TrialRun``), queued on the run's store writer
    thread: not awaited, so neither the loop nor the trial's slot waits on it; the writer runs
    every queued call before it closes."""
    def failed(future: Any) -> None:
        if (exc := future.exception()) is not None:
            ctx.log(f"trial {trial_id}: the triage scan failed: {exc!r}")

    ctx.writer.call(scan_finished, trial_id).add_done_callback(failed)
