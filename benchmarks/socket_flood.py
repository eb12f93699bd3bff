"""What a local client flooding the control socket costs the others (issue 23, item 6).

    python benchmarks/socket_flood.py [--trials 2] [--seconds 3]

Runs a suite of trials that each take ``--seconds`` (the slow fixture suite, its agent's turn
made a ``sleep``) twice through the real runner: once quiet, once while one client floods
the socket with newlines (reconnecting whenever it is closed), another sends ``status``
requests and never reads, and ``MAX_CLIENTS + 16`` connections sit idle. Meanwhile a
well-behaved client asks ``status`` every 0.2 s on a new connection. Printed side by side:
the trials' durations and that client's ``status`` latency. Goal: no trial delayed by more
than 10 %, ``status`` answered within a second.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.paths import socket_path
from agentmeter_tui.core.run.clients import MAX_CLIENTS
from agentmeter_tui.core.run.control import ControlClient, ControlError
from agentmeter_tui.core.store import Store
from tests.adversarial.flood_support import misbehave

SLOW = ROOT / "tests" / "fixtures" / "suites" / "slow"


def suite_of(folder: Path, trials: int, seconds: float) -> Path:
    suite = folder / "slow"
    shutil.copytree(SLOW, suite)
    for scenario in (suite / "scenarios").glob("*.toml"):
        scenario.write_text(scenario.read_text().replace("sleep 0.4", f"sleep {seconds:g}"))
    text = (suite / "suite.toml").read_text().replace("trials = 3", f"trials = {trials}")
    (suite / "suite.toml").write_text(text + "\n[budgets.default]\nwall_seconds = 120\n")
    return suite


def ask_status(db: Path, stop: threading.Event, latencies: list[float], failures: list[str]) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            with ControlClient(db, timeout=30) as client:
                client.request("status")
            latencies.append(time.monotonic() - started)
        except (ControlError, OSError) as exc:
            if socket_path(db).exists():
                failures.append(str(exc))
        stop.wait(0.2)


def one_run(folder: Path, trials: int, seconds: float, flood: bool) -> dict:
    db = folder / ("flood.db" if flood else "quiet.db")
    suite = suite_of(folder / ("f" if flood else "q"), trials, seconds)
    subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--detach", "--db", str(db)],
                   check=True, capture_output=True)
    stop = threading.Event()
    latencies, failures = [], []
    threads, idle, flooded = misbehave(db, stop, MAX_CLIENTS + 16) if flood else ([], [], [0])
    threads.append(threading.Thread(target=ask_status, args=(db, stop, latencies, failures), daemon=True))
    for thread in threads:
        thread.start()
    store = Store(db)
    try:
        while next(store.db.query("select status from runs"))["status"] != "finished":
            time.sleep(0.2)
        rows = store.trials("slow")
    finally:
        stop.set()
        for sock in idle:
            sock.close()
        for thread in threads:
            thread.join()
        store.close()
    durations = [(datetime.fromisoformat(t["finished_at"]) - datetime.fromisoformat(t["started_at"])).total_seconds()
                 for t in rows]
    return {"durations": durations, "statuses": [t["status"] for t in rows], "latencies": latencies,
            "failures": failures, "flood_mb": flooded[0] / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2, help="trials per model (two models)")
    parser.add_argument("--seconds", type=float, default=3.0, help="how long each trial's agent works")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentmeter-socket-flood-") as tmp:
        quiet = one_run(Path(tmp), args.trials, args.seconds, flood=False)
        flood = one_run(Path(tmp), args.trials, args.seconds, flood=True)
    print(f"{'':24}{'quiet':>12}{'flooded':>12}")
    for name, pick in (("trial s, median", lambda r: statistics.median(r["durations"])),
                       ("trial s, max", lambda r: max(r["durations"])),
                       ("status ms, median", lambda r: 1000 * statistics.median(r["latencies"])),
                       ("status ms, max", lambda r: 1000 * max(r["latencies"])),
                       ("status answers", lambda r: len(r["latencies"])),
                       ("status failures", lambda r: len(r["failures"])),
                       ("flood MB sent", lambda r: r["flood_mb"])):
        print(f"{name:24}{pick(quiet):>12.2f}{pick(flood):>12.2f}")
    delay = max(flood["durations"]) / max(quiet["durations"]) - 1
    worst = max(flood["latencies"])
    print(f"trials: {sorted(set(quiet['statuses']))} quiet, {sorted(set(flood['statuses']))} flooded")
    print(f"longest trial delayed {delay:+.1%} (goal <= +10 %); slowest status {worst * 1000:.0f} ms (goal < 1000)")
    for failure in flood["failures"][:3]:
        print(f"status failed while flooded: {failure}")


if __name__ == "__main__":
    main()
