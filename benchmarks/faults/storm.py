"""The runner SIGKILLed at seeded moments of one run, ``storms`` times, restarted each time with
``agentmeter run``; at the end every cell is final exactly once, no trial that had finished
was touched again (status and events unchanged), and no process of any trial is left.

A moment is "the run has written k more events since this runner started" (k seeded), so a
fixed seed kills at the same points of the run however fast the machine is."""

from __future__ import annotations

import os
import random
import shutil
import signal
from pathlib import Path

from agentmeter_tui.core.procs import processes_with_token
from agentmeter_tui.core.store import Store

from .common import FIXTURES, Cell, agentmeter, alive, total_events, wait_until


def storm_cell(storms: int, rng: random.Random, folder: Path) -> Cell:
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
        target = total_events(store, "slow") + rng.randint(3, 30)
        wait_until(lambda pid=row["pid"], s=store, n=target: total_events(s, "slow") >= n or not alive(pid),
                   "the run to write its next events")
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
