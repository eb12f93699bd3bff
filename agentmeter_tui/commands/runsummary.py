"""What the store says of the last run, for when no runner answers: ``status`` after a run
ended, ``run`` on a suite whose every cell already has a result."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any


def last_run(db: Path) -> dict[str, Any] | None:
    """The newest run of the store with its trials' outcome, or None (no store, no run)."""
    from ..core.store import Store

    if not db.is_file():
        return None
    store = Store(db, readonly=True)
    try:
        return store.runs.last_run()
    finally:
        store.close()


def run_line(run: dict[str, Any]) -> str:
    """``run 3 of suite demo finished at ...: 4 passed, 2 failed; 12,345 tokens, $0.0123``."""
    counts = ", ".join(f"{n} {status}" for status, n in run["statuses"].items()) or "no trials"
    cost = "unpriced" if run.get("cost_usd") is None else f"${run['cost_usd']:.4f}"
    when = f" at {run['finished_at']}" if run.get("finished_at") else ""
    return f"run {run['id']} of suite {run['suite_id']} {run['status']}{when}: {counts}; {run['tokens']:,} tokens, {cost}"


def print_last_run(db: Path, *, as_json: bool, why: str) -> int:
    """``status`` with no runner listening: the last run's summary from the store (exit 0), or
    ``why`` no runner answers when the store has no run (exit 1)."""
    try:
        run = last_run(db)
    except sqlite3.DatabaseError as exc:
        print(f"agentmeter status: {db}: not a readable store ({exc})", file=sys.stderr)
        return 1
    if run is None:
        print(f"agentmeter status: {why}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps({"runner": None, "last_run": run}, indent=2))
        return 0 if run["status"] != "running" else 1
    print(f"no runner is running for {db}; the last one:")
    print(f"  {run_line(run)}")
    if run["status"] == "running":  # marked running, but nobody answers: the runner died
        print(f"  its runner is gone (pid {run['pid']}); `agentmeter run SUITE --db {db}` marks its running "
              "trials infra-invalid and runs what is left")
        return 1
    return 0
