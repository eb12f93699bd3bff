"""Event ingest: what the runner sustains storing events from 64 agents printing JSONL as fast
as they can, beside plain batched SQLite inserts of the same rows on the same machine.

    python benchmarks/ingest.py [--agents 64] [--events 5000]

Target (issue 2): the runner reaches at least a third of the plain rate.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.store import Store
from benchmarks.loadsuite import run_headless, write_suite


def runner_rate(folder: Path, agents: int, events: int) -> tuple[float, int, float]:
    suite = write_suite(folder, "ingest", trials=agents, concurrency=agents,
                        args=["{python}", str(ROOT / "benchmarks" / "fake_agent.py"), str(events)])
    db = folder / "ingest.db"
    started = time.monotonic()
    run_headless(suite, db)
    wall = time.monotonic() - started
    store = Store(db)
    count = store.db.execute("select count(*) from events").fetchone()[0]
    # Sustained: from the first event parsed to the last one, all of them stored by then.
    first, last = store.db.execute("select min(ts), max(ts) from events").fetchone()
    span = last - first
    statuses = {r["status"] for r in store.db.query("select status from trials")}
    assert statuses == {"failed"}, statuses  # verifier "none": every trial ends failed, none errored
    return count / span, count, wall


def plain_rate(folder: Path, rows: list[tuple], batch: int = 1000) -> float:
    db_path = folder / "plain.db"
    Store(db_path).close()  # the same schema and indexes
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    sql = "insert into events (trial_id, seq, ts, kind, stream, text, data) values (?, ?, ?, ?, ?, ?, ?)"
    started = time.perf_counter()
    for i in range(0, len(rows), batch):
        with conn:
            conn.executemany(sql, rows[i:i + batch])
    return len(rows) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--events", type=int, default=5000, help="events per agent")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ingest-"))
    try:
        rate, count, wall = runner_rate(folder, args.agents, args.events)
        store = Store(folder / "ingest.db")
        rows = [tuple(r) for r in store.db.execute(
            "select trial_id, seq, ts, kind, stream, text, data from events")]
        plain = plain_rate(folder, rows)
        print(f"agents {args.agents} x {args.events} events = {count:,} events stored "
              f"(whole command {wall:.2f} s)")
        print(f"runner, sustained (parse + store, first to last event): {rate:,.0f} events/s")
        print(f"plain batched SQLite inserts of the same rows: {plain:,.0f} events/s")
        print(f"ratio: {rate / plain:.2f} (target >= 0.33)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
