"""What a Swarm fleet costs and how fast it gets over a lost node (issues 28, 34), on one machine.

    python benchmarks/fleet.py [--trials 5] [--keep] [--only ours|harbor]     # as root

Brings up a 3-node fleet with scripts/fleet.sh (its own namespaces and engines: the machine's
own dockerd is not used) and prints:

- trials per second of the smoke suite (``--trials`` per task and model, 4 x that many trials)
  on 1 node (the two workers drained: the same machinery, one node placing) and on 3 nodes.
  All nodes share this machine's cores, so 3 nodes cannot be faster: the figure is the cost of
  the fleet's machinery (the issue's bar: within 20 % of one node);
- node-loss recovery: trials of 8 s each, node 3 killed (engine, containerd, containers: SIGKILL)
  while one runs there; seconds from the kill to the lost trials' infra-invalid rows (the bound
  docs/fleet.md gives), and to the last rerun's start on another node.

Both for our own swarm jobs (the smoke suite) and for Harbor-format trials (the Harbor fixture's
oracle suite on its two tasks that may go to any node, ``node_engines`` naming every node's
engine: each trial's container driven through the engine of its node, ``nodeengines.py``).
FLEET_NAME, FLEET_NET and FLEET_DIR override the fleet's names (one beside another fleet).

The fleet is taken down at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.store import Store
from tests.core.fleet_support import Fleet, fleet_down, fleet_harbor_suite, fleet_up, slow_solutions
from tests.core.sandbox_support import SMOKE, suite_copy

SLOW = ROOT / "tests" / "fixtures" / "suites" / "slow"
FLEET_ENV = {k: os.environ.get(k, v) for k, v in
             {"FLEET_NAME": "amb", "FLEET_NET": "10.213.79", "FLEET_DIR": "/tmp/agentmeter-fleet-bench"}.items()}
HARBOR_TASKS = '\ntasks = ["count", "probe"]'  # the oracle suite's tasks with allow_internet: any node


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def run(suite: Path, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db", str(db)],
                          capture_output=True, text=True, check=True)


def set_availability(fleet: Fleet, names: set[str], availability: str) -> None:
    client = fleet.client()
    try:
        for node in client.nodes.list():
            if node.attrs["Description"]["Hostname"] in names:
                node.update({**node.attrs["Spec"], "Availability": availability})
    finally:
        client.close()


def smoke_suite(fleet: Fleet, folder: Path, label: str, trials: int) -> tuple[Path, str]:
    suite_id = f"fleet-bench-{label}-{time.time_ns()}"
    suite = suite_copy(SMOKE, folder / label, fleet.sandbox(), suite_id=suite_id,
                       replace={"trials = 2": f"trials = {trials}", "concurrency = 4": "concurrency = 8"})
    return suite, suite_id


def harbor_suite(fleet: Fleet, folder: Path, label: str, trials: int) -> tuple[Path, str]:
    return fleet_harbor_suite(folder / label, fleet, {"trials = 1": f"trials = {trials}{HARBOR_TASKS}",
                                                      "concurrency = 2": "concurrency = 8"})


def throughput(make, fleet: Fleet, folder: Path, label: str, trials: int) -> float:
    suite, suite_id = make(fleet, folder, label, trials)
    db = folder / f"{label}.db"
    run(suite, db)
    rows = Store(db).trials(suite_id)
    span = max(stamp(t["finished_at"]) for t in rows) - min(stamp(t["started_at"]) for t in rows)
    nodes = sorted({t["node"] for t in rows})
    rate = len(rows) / span
    print(f"{label}: {len(rows)} trials in {span:.1f} s = {rate:.2f} trials/s on {', '.join(nodes)}", flush=True)
    return rate


def slow_suite(fleet: Fleet, folder: Path) -> tuple[Path, str]:
    """Our own jobs: the slow suite, trials of 8 s each."""
    suite_id = f"fleet-bench-loss-{time.time_ns()}"
    suite = suite_copy(SLOW, folder / "loss", fleet.sandbox(), suite_id=suite_id,
                       replace={"concurrency = 2": "concurrency = 6"})
    for scenario in (suite / "scenarios").glob("*.toml"):
        scenario.write_text(scenario.read_text().replace("sleep 0.4", "sleep 8"))
    return suite, suite_id


def slow_harbor_suite(fleet: Fleet, folder: Path) -> tuple[Path, str]:
    """Harbor trials: the oracle's solutions sleep 8 s first."""
    suite, suite_id = fleet_harbor_suite(folder / "harbor-loss", fleet, {
        "trials = 1": f"trials = 3{HARBOR_TASKS}", "concurrency = 2": "concurrency = 6"})
    slow_solutions(suite, {"count", "probe"}, 8)
    return suite, suite_id


def recovery(make, fleet: Fleet, folder: Path, label: str) -> None:
    suite, suite_id = make(fleet, folder)
    db = folder / f"{label}-loss.db"
    victim = fleet.node(3)
    runner = subprocess.Popen([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db",
                               str(db)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        if db.exists():
            store = Store(db)
            try:
                if any(t["status"] == "running" and t["node"] == victim for t in store.trials(suite_id)):
                    break
            finally:
                store.close()
        if runner.poll() is not None:
            print(f"{label} node loss: the run ended before a trial ran on the victim; run again", flush=True)
            return
        time.sleep(0.1)
    killed = time.time()
    fleet.run("kill", "3")
    runner.wait()
    rows = Store(db).trials(suite_id)
    lost = [t for t in rows if t["node"] == victim and t["status"] == "infra-invalid"]
    if not lost:
        print(f"{label} node loss: no trial was lost (they ended before the node went down)", flush=True)
        return
    ended = max(stamp(t["finished_at"]) for t in lost) - killed
    reruns = [t for t in rows if t["id"] > min(x["id"] for x in lost) and t["attempt"] > 0]
    rerun = max((stamp(t["started_at"]) for t in reruns if t["started_at"]), default=killed) - killed
    print(f"{label} node loss: {len(lost)} trial(s) lost on {victim}; infra-invalid {ended:.1f} s after the kill, "
          f"rerun started on {sorted({t['node'] or '?' for t in reruns})} {rerun:.1f} s after it", flush=True)
    fleet.run("up", "3")  # the node back: what it kept of the lost jobs goes


def measure(fleet: Fleet, folder: Path, label: str, make, slow, trials: int) -> None:
    """Trials per second on 1 node and on 3, then a node's loss, for one kind of trial."""
    # The images built and pushed, and pulled by every node (a run of 1 trial each may miss one).
    throughput(make, fleet, folder, f"{label}-warm-up", 3)
    set_availability(fleet, {fleet.node(2), fleet.node(3)}, "drain")
    one = throughput(make, fleet, folder, f"{label}-1-node", trials)
    set_availability(fleet, {fleet.node(2), fleet.node(3)}, "active")
    three = throughput(make, fleet, folder, f"{label}-3-nodes", trials)
    print(f"{label}: 3 nodes / 1 node: {three / one:.2f} (the fleet's machinery cost; the bar: >= 0.80)", flush=True)
    recovery(slow, fleet, folder, label)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5, help="trials per task and model (4 x this many trials)")
    parser.add_argument("--keep", action="store_true", help="leave the fleet up")
    parser.add_argument("--only", choices=("ours", "harbor"), help="our own swarm jobs or Harbor trials only")
    args = parser.parse_args()
    fleet = fleet_up(3, **FLEET_ENV)
    kinds = [("ours", smoke_suite, slow_suite), ("harbor", harbor_suite, slow_harbor_suite)]
    try:
        with tempfile.TemporaryDirectory(prefix="agentmeter-fleet-bench-") as tmp:
            folder = Path(tmp)
            for label, make, slow in kinds:
                if args.only in (None, label):
                    measure(fleet, folder, label, make, slow, args.trials)
    finally:
        if not args.keep:
            fleet_down(fleet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
