"""Where `agentmeter run --detach` spends its time before it returns.

    python benchmarks/detach.py [--rounds 3] [--suite suites/demo]

Each round starts a runner for the suite on a fresh store the way `run` does
(``commands.run.spawn_runner``) and prints: the client's imports, loading the suite, and the
time from the runner's spawn until it answers on its socket; then the whole `run --detach`
command, end to end; then stops the runner. The runner answers once it holds the store and
has recorded the run, before it starts the scripted model server, the proxy or the sandbox
(a docker suite's image builds are told to the client, not waited for), so the last figure
is a Python start, the runner's imports and a few store writes (issue 24, item 9: it was
12-22 s under load, when the runner answered only after all of its preparation).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one_round(suite: Path, folder: Path) -> dict[str, float]:
    started = time.monotonic()
    from agentmeter_tui.commands.run import spawn_runner
    from agentmeter_tui.core.suites.load import load_suite

    imported = time.monotonic()
    load_suite(suite)
    loaded = time.monotonic()
    db = folder / "spawn.db"
    spawn_runner(suite, db, None)
    answered = time.monotonic()
    _stop(db)
    whole_db = folder / "detach.db"
    begin = time.monotonic()
    subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--detach", "--db", str(whole_db)],
                   check=True, capture_output=True)
    whole = time.monotonic() - begin
    _stop(whole_db)
    return {"imports": imported - started, "load_suite": loaded - imported, "until it answers": answered - loaded,
            "run --detach": whole}


def _stop(db: Path) -> None:
    subprocess.run([sys.executable, "-m", "agentmeter_tui", "stop", "--db", str(db)], capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--suite", default=str(ROOT / "suites" / "demo"))
    args = parser.parse_args()
    for number in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="agentmeter-detach-") as tmp:
            figures = one_round(Path(args.suite), Path(tmp))
        load = os.getloadavg()[0]
        print(f"round {number} (load {load:.1f}): " + ", ".join(f"{k} {v:.2f} s" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
