"""Fault matrix (issue 16, parts 1-2): inject faults into real runs and check what survives.

    python benchmarks/fault_matrix.py [--seed 7] [--trials 4] [--storms 20]
    python benchmarks/fault_matrix.py --ci     # the fixed-seed subset tests/core/test_fault_matrix.py runs

One line per cell: what was injected, how many survived intact, how many were lost (a cell
is lost when any check fails), then a total; the exit code is 1 when anything was lost.

Cells (local sandbox, the reference agent against the scripted model server):

- ``kill:operator``, ``kill:budget:tokens``, ``kill:budget:usd``, ``kill:budget:time``: a
  burner (a model call, then a tool call, forever) is stopped at a random moment (a seeded
  delay, or a seeded budget). After each: status ``killed`` with that reason; no process of
  the trial left; its usage exactly that of the calls it completed and reported (what the
  server served, first ``turns`` calls); its events kept, the runner's kill note among them.
- ``runner:kill-9``: the runner is SIGKILLed at seeded random moments during a run of six
  short trials, ``storms`` times, restarted each time with ``agentmeter run``; at the end
  every cell is final exactly once, no trial that had finished was touched again (status and
  events unchanged), and no process of any trial is left.

Not here yet: the real CLIs, the docker, ssh and swarm sandboxes, disk full, dockerd restart,
upstream resets and a dying scripted server (issue 16 lists them).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orjson

from agentmeter_tui.core.procs import processes_with_token
from agentmeter_tui.core.run.control import ControlClient, ControlError
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES, TokenUsage

FIXTURES = ROOT / "tests" / "fixtures" / "suites"
BURNER = """description = "a model call, then a tool call, forever"
[[turns]]
loop = true
shell = "sleep 0.1; echo again"
usage = { uncached_input = 1500, cached_input = 500, output = 40 }
delay_ms = 80
"""


def agentmeter(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentmeter_tui", *args], capture_output=True, text=True,
                          check=check)


def wait_until(condition, what: str, limit: float = 600.0):
    """Poll until ``condition()`` is truthy (a fail-safe limit, not a speed target)."""
    deadline = time.monotonic() + limit
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def burner_suite(folder: Path, trials: int, budget: str) -> Path:
    suite = folder / "suite"
    shutil.copytree(FIXTURES / "runaway", suite)
    text = (suite / "suite.toml").read_text()
    text = re.sub(r'(?ms)^\[\[models\]\]\nid = "(sleeper|thrasher)"\n\n', "", text)
    text = text.replace("trials = 1", f"trials = {trials}").replace("concurrency = 3", f"concurrency = {trials}")
    text = re.sub(r"(?ms)^\[budgets\.default\].*", f"[budgets.default]\n{budget}\n", text)
    (suite / "suite.toml").write_text(text)
    (suite / "scenarios" / "burner.toml").write_text(BURNER)
    return suite


def trial_intact(store: Store, trial: dict, reason: str) -> list[str]:
    """What is wrong with a killed trial (empty: it survived)."""
    problems = []
    if (trial["status"], trial["reason"]) != ("killed", reason):
        problems.append(f"status {trial['status']} / {trial['reason']}")
    if processes_with_token(trial["proc_token"]):
        problems.append("processes left")
    served = (orjson.loads(trial["extra"] or "{}").get("scripted") or {}).get("served") or []
    completed = [TokenUsage(*values) for _turn, _status, done, values in served if done]
    kept = sum(completed[:trial["turns"]], TokenUsage())
    if {c: trial[c] for c in TOKEN_CLASSES} != kept.as_dict():
        problems.append(f"usage {[trial[c] for c in TOKEN_CLASSES]} != served {kept.as_tuple()}")
    notes = [e for e in store.events(trial["id"]) if e[3] == "runner" and (e[4] or "").startswith("killing: ")]
    if len(notes) != 1:
        problems.append(f"{len(notes)} kill notes")
    return problems


def kill_cell(reason: str, trials: int, rng: random.Random, folder: Path) -> tuple[int, int, list[str]]:
    budgets = {"operator": "wall_seconds = 3600",
               "budget:tokens": f"wall_seconds = 3600\ntokens = {rng.randint(4_000, 30_000)}",
               "budget:usd": f"wall_seconds = 3600\nusd = {rng.uniform(0.004, 0.03):.4f}",
               "budget:time": f"wall_seconds = {rng.uniform(1.0, 4.0):.2f}"}
    suite, db = burner_suite(folder, trials, budgets[reason]), folder / "kill.db"
    agentmeter("run", str(suite), "--detach", "--db", str(db))
    store = Store(db)
    try:
        if reason == "operator":
            running = wait_until(lambda: len(store.trials("runaway", "status = 'running'")) == trials and
                                 store.trials("runaway", "status = 'running'"), "every burner running")
            for trial in running:
                time.sleep(rng.uniform(0.05, 1.5))  # a random moment: in a model call or a tool call
                with ControlClient(db) as client:
                    client.request("kill", trial=trial["id"])
        wait_until(lambda: next(store.db.query("select status from runs"))["status"] == "finished", "the run")
        rows = store.trials("runaway")
        lost = [f"#{t['id']}: {', '.join(p)}" for t in rows if (p := trial_intact(store, t, reason))]
        return len(rows), len(rows) - len(lost), lost
    finally:
        store.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def storm_cell(storms: int, rng: random.Random, folder: Path) -> tuple[int, int, list[str]]:
    suite, db = folder / "slow", folder / "storm.db"
    shutil.copytree(FIXTURES / "slow", suite)
    # Each kill loses the running trials (infra-invalid, retried): room for as many retries as kills.
    text = (suite / "suite.toml").read_text().replace(
        "trials = 3", f"trials = {max(3, storms)}\nmax_retries = {min(10, storms + 1)}")
    (suite / "suite.toml").write_text(text)
    finished: dict[int, tuple[str, int]] = {}
    injected = 0
    store = None
    for _ in range(storms):
        agentmeter("run", str(suite), "--detach", "--db", str(db), check=False)
        if not db.exists():
            break
        store = store or Store(db)
        row = next(store.db.query("select pid, status from runs order by id desc limit 1"))
        if row["status"] != "running" or not alive(row["pid"]):
            break  # nothing left to run
        time.sleep(rng.uniform(0.2, 1.5))  # a random moment of the run
        for trial in store.trials("slow", "finished_at is not null"):
            finished.setdefault(trial["id"], (trial["status"], store.event_count(trial["id"])))
        try:
            os.kill(row["pid"], signal.SIGKILL)
            injected += 1
        except ProcessLookupError:
            pass
        wait_until(lambda pid=row["pid"]: not alive(pid), "the killed runner to be gone")
    agentmeter("run", str(suite), "--headless", "--db", str(db))
    store = store or Store(db)
    try:
        trials = store.trials("slow")
        problems = []
        countable = [t for t in trials if t["status"] != "infra-invalid"]
        cells = [(t["task_id"], t["model"], t["trial_index"]) for t in countable]
        if len(cells) != len(set(cells)):
            problems.append("a cell finished twice")
        expected = 2 * max(3, storms)
        if len(set(cells)) != expected:
            problems.append(f"{len(set(cells))} of {expected} cells final")
        for trial_id, (status, events) in finished.items():
            now = store.trial(trial_id)
            if (now["status"], store.event_count(trial_id)) != (status, events):
                problems.append(f"#{trial_id} touched after it finished")
        left = [t["id"] for t in trials if processes_with_token(t["proc_token"])]
        if left:
            problems.append(f"processes of {left} left")
        return injected, injected if not problems else 0, problems
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--trials", type=int, default=4, help="burners per kill cell")
    parser.add_argument("--storms", type=int, default=20, help="SIGKILLs of the runner")
    parser.add_argument("--ci", action="store_true", help="the fixed-seed subset: 2 burners a cell, 4 storms")
    args = parser.parse_args()
    if args.ci:
        args.seed, args.trials, args.storms = 7, 2, 4
    rng = random.Random(args.seed)
    total = [0, 0, 0]
    print(f"fault matrix, seed {args.seed}: cell · injected · survived · lost")
    cells = [(f"local/reference/kill:{r}", lambda folder, r=r: kill_cell(r, args.trials, rng, folder))
             for r in ("operator", "budget:tokens", "budget:usd", "budget:time")]
    cells.append(("local/reference/runner:kill-9", lambda folder: storm_cell(args.storms, rng, folder)))
    for name, run in cells:
        with tempfile.TemporaryDirectory(prefix="agentmeter-faults-") as tmp:
            try:
                injected, survived, problems = run(Path(tmp))
            except (TimeoutError, ControlError, subprocess.CalledProcessError) as exc:
                injected, survived, problems = 1, 0, [f"{type(exc).__name__}: {exc}"]
        lost = injected - survived
        total = [total[0] + injected, total[1] + survived, total[2] + lost]
        print(f"{name:<36} injected {injected:>3} · survived {survived:>3} · lost {lost}"
              + (f"  ({'; '.join(problems)[:300]})" if problems else ""), flush=True)
    print(f"{'total':<36} injected {total[0]:>3} · survived {total[1]:>3} · lost {total[2]}")
    return 1 if total[2] else 0


if __name__ == "__main__":
    sys.exit(main())
