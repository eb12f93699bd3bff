"""``SANDBOX/reference/kill:verifying``: the operator's kill arrives while the verifier runs.

The reference agent answers at once (one model call, no tool); the task's test.sh prints a
line, then runs a long step. Once the trial is ``verifying`` and test.sh's process exists
(plus a seeded delay in the full run), the operator kills the trial. What must hold: the
trial ends ``killed`` (reason ``operator``), not passed or failed, with no verdict; no
process of the trial is left (test.sh's included); nothing labelled with the cell's suite on
the engine; usage exactly that of the one call served; events whole, with one kill note.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import psutil

from agentmeter_tui.core.procs import TOKEN_VAR
from agentmeter_tui.core.run.control import ControlClient
from agentmeter_tui.core.store import Store

from .common import (
    Cell,
    agentmeter,
    burner_suite,
    run_status,
    trial_intact,
    unique_id,
    wait_runners_gone,
    wait_until,
)
from .kills import sandbox_table

ANSWER = """description = "answers at once: the verifier is what runs long"
[[turns]]
text = "done"
usage = { uncached_input = 1500, cached_input = 500, output = 40 }
"""
SLOW_TEST = "#!/bin/sh\necho 'verifying: the long step starts'\nsleep 30\nexit 0\n"


def verifier_running(token: str) -> bool:
    """test.sh runs: a process with the trial's token whose command line names it."""
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "test.sh" in " ".join(proc.info["cmdline"] or ()) and proc.environ().get(TOKEN_VAR) == token:
                return True
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return False


def verifying_cell(kind: str, trials: int, rng: random.Random, folder: Path, jitter: bool) -> Cell:
    suite_id = unique_id(f"{kind}-verifying")
    db = folder / "verifying.db"
    with sandbox_table(kind, folder, trials, suite_id) as (sandbox, leftovers):
        suite = burner_suite(folder, trials, "wall_seconds = 3600", suite_id, sandbox)
        (suite / "scenarios" / "burner.toml").write_text(ANSWER)
        (suite / "spin" / "tests" / "test.sh").write_text(SLOW_TEST)
        (suite / "spin" / "task.toml").write_text("[task]\ntier = \"hard\"\n[verifier]\ntimeout_sec = 900\n")
        agentmeter("run", str(suite), "--detach", "--db", str(db))
        store = Store(db)
        try:
            for _ in range(trials):
                trial = wait_until(lambda: (rows := store.trials(suite_id, "status = 'verifying'")) and rows[0],
                                   "a trial verifying")
                wait_until(lambda t=trial: verifier_running(t["proc_token"]) or store.trial(t["id"])["finished_at"],
                           f"trial {trial['id']}'s test.sh")
                if jitter:
                    time.sleep(rng.uniform(0.0, 0.5))
                with ControlClient(db) as client:
                    client.request("kill", trial=trial["id"])
                wait_until(lambda t=trial: store.trial(t["id"])["finished_at"], f"trial {trial['id']} to end")
            wait_until(lambda: run_status(store) == "finished", "the run")
            wait_runners_gone(store)
            rows = store.trials(suite_id)
            lost = []
            for t in rows:
                problems = trial_intact(store, t, "operator")
                if t["verifier_output"] is not None or t["passed"]:
                    problems.append(f"a verdict after the kill: {t['verifier_output']!r}")
                if problems:
                    lost.append(f"#{t['id']}: {', '.join(problems)}")
            if left := leftovers():
                lost.append(f"left behind: {', '.join(left)}")
            return len(rows), max(0, len(rows) - len(lost)), lost
        finally:
            store.close()
