"""Report speed: ``agentmeter report --format json`` on a store holding a synthetic grid.

    python benchmarks/report.py [--repeat 3]

Two sizes: the AgentMeter grid (24 configurations x 90 tasks x 3 trials, plus the
infra-invalid retries the generator adds) and 100,000 trials (25 x 400 x 10). The records
are deterministic (``core/reporting/synthetic.py``), written as JSONL, imported with
``agentmeter import-trials`` (or ``records.import_records`` when that command is not
there), then reported. Wall times are the best of ``--repeat`` runs: the whole command
(interpreter start included) and the report alone, in process.

Targets (SPEC section 12): < 2 s for the 6,480-trial grid, < 10 s for 100,000 trials.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.reporting.records import import_records, write_records
from agentmeter_tui.core.reporting import render_json, report_from_store
from agentmeter_tui.core.reporting.synthetic import synthetic_records
from agentmeter_tui.core.store import Store

SIZES = (("24 configs x 90 tasks x 3 trials", dict(models=6, clis=4, tasks=90, trials=3), 2.0),
         ("25 configs x 400 tasks x 10 trials", dict(models=5, clis=5, tasks=400, trials=10), 10.0))


def load(folder: Path, shape: dict) -> tuple[Path, int, str]:
    records = list(synthetic_records(**shape))
    jsonl = folder / "t.jsonl"
    with jsonl.open("wb") as handle:
        write_records(records, handle)
    db = folder / "r.db"
    if importlib.util.find_spec("agentmeter_tui.commands.trials") is not None:
        subprocess.run([sys.executable, "-m", "agentmeter_tui", "import-trials", str(jsonl), "--db", str(db)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        how = "agentmeter import-trials"
    else:
        store = Store(db)
        import_records(store, records)
        store.close()
        how = "records.import_records"
    return db, len(records), how


def best_of(repeat: int, action) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'grid':<36} {'trials':>8} {'command':>9} {'in-process':>11} {'target':>7}  imported with")
    for label, shape, target in SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            db, count, how = load(Path(tmp), shape)
            command = [sys.executable, "-m", "agentmeter_tui", "report", "--db", str(db), "--format", "json"]

            def whole() -> None:
                subprocess.run(command, check=True, stdout=subprocess.DEVNULL)

            def in_process() -> None:
                store = Store(db)
                render_json(report_from_store(store))
                store.close()

            cli_time = best_of(args.repeat, whole)
            core_time = best_of(args.repeat, in_process)
            verdict = "ok" if cli_time < target else "SLOW"
            print(f"{label:<36} {count:>8,} {cli_time:>8.2f}s {core_time:>10.2f}s {target:>6.0f}s  {how} [{verdict}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
