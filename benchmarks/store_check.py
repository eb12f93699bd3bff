"""What checking a store before writing costs (``core/store/check.py``: SQLite's quick check,
which reads every page), by store size: paid by every command that writes (``score``, the
imports, ``run``), not by those that only read.

    python benchmarks/store_check.py [--events 20000,100000,400000]

Each store holds ``--events`` events of 300-byte texts (about 0.6 KB a row with its index), the
shape of a transcript. Prints the file size, the milliseconds of one quick check (the file in
the page cache, as it is right after a run) and of opening a ``Store`` to write (the check plus
the rest of opening).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.store.check import damage


def build(path: Path, events: int) -> None:
    Store(path).close()  # the real schema
    with sqlite3.connect(path) as conn:
        conn.execute("insert into suites (id, name) values ('s', 's')")
        conn.execute("insert into trials (id, suite_id, task_id, model, cli, trial_index, status) "
                     "values (1, 's', 't', 'm', 'c', 0, 'passed')")
        conn.executemany("insert into events (trial_id, seq, ts, kind, stream, text, data) "
                         "values (?, ?, ?, ?, ?, ?, ?)",
                         ((1, i, 1.0, "assistant", "stdout", "x" * 300, None) for i in range(events)))
        conn.commit()
        conn.execute("pragma wal_checkpoint(truncate)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="20000,100000,400000")
    args = parser.parse_args()
    print(f"{'events':>9} {'MB':>7} {'quick check ms':>15} {'open to write ms':>17} {'ms/MB':>7}")
    for events in (int(n) for n in args.events.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "agentmeter.db"
            build(path, events)
            size = path.stat().st_size / 1e6
            conn = sqlite3.connect(path)
            damage(conn)  # warm the page cache
            started = time.perf_counter()
            assert damage(conn) is None
            check = (time.perf_counter() - started) * 1000
            conn.close()
            started = time.perf_counter()
            Store(path).close()
            opened = (time.perf_counter() - started) * 1000
            print(f"{events:>9} {size:>7.1f} {check:>15.0f} {opened:>17.0f} {check / size:>7.1f}")


if __name__ == "__main__":
    main()
