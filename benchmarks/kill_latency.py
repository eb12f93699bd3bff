"""How soon a runaway is stopped: the speed figures the kill tests no longer assert.

    python benchmarks/kill_latency.py [--rounds 5]

Each round runs the runaway suite (``tests/fixtures/suites/runaway``: a token burner, a
sleeper past its time budget, a thrasher) headless through the real runner and prints, per
round, the seconds from the burner's usage event that crossed its token budget to its final
row (every process of the trial gone, usage kept), and from the sleeper's time budget to its
final row. Target (issue 2): under 2 s on an idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import tomllib
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES

RUNAWAY = ROOT / "tests" / "fixtures" / "suites" / "runaway"
TARGET = 2.0


def one_round(folder: Path) -> tuple[float, float]:
    db = folder / "kill.db"
    subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(RUNAWAY), "--headless", "--db", str(db)],
                   check=True, capture_output=True)
    store = Store(db)
    try:
        trials = {t["model"]: t for t in store.trials("runaway")}
        burner, sleeper = trials["burner"], trials["sleeper"]
        total, crossed_at = 0, None
        for seq, ts, kind, *_ in store.events(burner["id"]):
            if kind == "usage" and crossed_at is None:
                row = next(store.db.query("select * from usage where trial_id = ? and seq = ?", [burner["id"], seq]))
                total += sum(row[c] for c in TOKEN_CLASSES)
                crossed_at = ts if total >= 20000 else None
        burner_s = datetime.fromisoformat(burner["finished_at"]).timestamp() - crossed_at
        wall = float(tomllib.loads((RUNAWAY / "suite.toml").read_text())["budgets"]["default"]["wall_seconds"])
        sleeper_s = (datetime.fromisoformat(sleeper["finished_at"]) -
                     datetime.fromisoformat(sleeper["started_at"])).total_seconds() - wall
        return burner_s, sleeper_s
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    burners, sleepers = [], []
    for n in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="agentmeter-kill-") as tmp:
            burner_s, sleeper_s = one_round(Path(tmp))
        burners.append(burner_s)
        sleepers.append(sleeper_s)
        print(f"round {n + 1}: token budget crossed -> final {burner_s:.3f} s; "
              f"time budget reached -> final {sleeper_s:.3f} s (includes the trial's start)")
    worst = max(burners)
    print(f"token-budget kill: median {statistics.median(burners):.3f} s, worst {worst:.3f} s "
          f"(target < {TARGET:g} s: {'met' if worst < TARGET else 'MISSED'})")
    print(f"time-budget kill: median {statistics.median(sleepers):.3f} s, worst {max(sleepers):.3f} s")


if __name__ == "__main__":
    main()
