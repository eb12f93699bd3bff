"""Kill cells of the oracle agent (``[[clis]] adapter = "oracle"``: the task's
``solution/solve.sh`` run as the agent, no model) in the local, docker and ssh sandboxes.

A solve.sh that prints a line, then runs a long step (``sleep``), is stopped by the operator
(once that line is in the store, plus a seeded delay in the full run) or by a seeded wall
clock. Token and USD budgets cannot trip: the oracle calls no model, so its usage stays
zero; there are no such cells. The docker task is Harbor-format (``/solution``, ``/tests``,
built ``FROM agentmeter/host-bash``); the local one is the plain task layout with a
``solution/`` folder, which the local and ssh sandboxes place in the trial's scratch folder
(ssh: a throwaway sshd on 127.0.0.1, whose trial folders must all be gone after).

After each: status ``killed`` with that reason; no process of the trial on this machine (a
container's processes and the ssh host's are this machine's too); nothing labelled with the
cell's suite on the engine, no trial folder on the ssh host; zero tokens; no verification (no verifier output, not passed: test.sh would pass);
the solve.sh's line among the events, numbered without a gap, with one kill note.
"""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

from agentmeter_tui.core.procs import processes_with_token
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES

from .common import (
    Cell,
    agentmeter,
    events_intact,
    judge_cell,
    kill_each_at,
    unique_id,
)
from .kills import sandbox_table

REASONS = ("operator", "budget:time")  # budget:tokens and budget:usd cannot trip at zero tokens
SANDBOXES = ("local", "docker", "ssh")
STEP = "solve: the long step starts"
SOLVE = f"#!/bin/bash\necho '{STEP}'\nsleep 600\necho done > /tmp/never\n"
# Would pass any agent: a killed trial must never be verified.
TEST = "#!/bin/bash\nmkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt\necho 'the verifier ran'\n"


def oracle_suite(folder: Path, suite_id: str, kind: str, trials: int, budget: str, sandbox: str) -> Path:
    """One task with a long solve.sh; Harbor-format in docker, the plain layout locally."""
    suite, task = folder / "suite", folder / "suite" / "tasks" / "long"
    (task / "solution").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "instruction.md").write_text("Run the solution.\n")
    (task / "solution" / "solve.sh").write_text(SOLVE)
    if kind == "docker":
        (task / "environment").mkdir()
        (task / "environment" / "Dockerfile").write_text("FROM agentmeter/host-bash\nWORKDIR /app\n")
        (task / "task.toml").write_text('version = "2.0"\n[verifier]\ntimeout_sec = 30.0\n')
        (task / "tests" / "test.sh").write_text(TEST)
    else:
        (task / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
        (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 'the verifier ran'\nexit 0\n")
    (suite / "suite.toml").write_text(textwrap.dedent(f"""\
        [suite]
        id = "{suite_id}"
        trials = {trials}
        concurrency = {trials}
        max_retries = 0
        tasks_dir = "tasks"
        kill_grace = 3.0

        [[models]]
        id = "none"
        provider = "none"

        [[clis]]
        adapter = "oracle"

        [providers.none]
        kind = "none"

        [budgets.default]
        {budget}
        """) + (f"\n[sandbox]\n{sandbox}\n" if sandbox else ""))
    return suite


def step_started(store: Store, trial_id: int) -> bool:
    return any(STEP in (e[4] or "") for e in store.events(trial_id))


def oracle_intact(store: Store, trial: dict, reason: str) -> list[str]:
    problems = []
    if (trial["status"], trial["reason"]) != ("killed", reason):
        problems.append(f"status {trial['status']} / {trial['reason']}")
    if processes_with_token(trial["proc_token"]):
        problems.append("processes left")
    if any(trial[c] for c in TOKEN_CLASSES):
        problems.append(f"tokens {[trial[c] for c in TOKEN_CLASSES]}")
    if trial["verifier_output"] is not None or trial["passed"]:
        problems.append(f"verified after the kill: {trial['verifier_output']!r}")
    events = list(store.events(trial["id"]))
    if not any(STEP in (e[4] or "") for e in events):
        problems.append("the solve.sh's line is not among the events")
    if any("the verifier ran" in (e[4] or "") for e in events):
        problems.append("the verifier ran")
    notes = [e for e in events if e[3] == "runner" and (e[4] or "").startswith("killing: ")]
    if len(notes) != 1:
        problems.append(f"{len(notes)} kill notes")
    return problems + events_intact(store, trial)


def oracle_cell(kind: str, reason: str, trials: int, rng: random.Random, folder: Path, jitter: bool) -> Cell:
    suite_id = unique_id(f"oracle-{kind}-{reason.replace(':', '-')}")
    # The docker wall clock leaves room for the image build and the container's start, the ssh
    # one for the session's setup (the task sets no [agent] timeout_sec: it would be the wall
    # clock instead).
    low, high = {"docker": (20.0, 30.0), "ssh": (4.0, 8.0)}.get(kind, (1.0, 4.0))
    budget = "wall_seconds = 3600" if reason == "operator" else f"wall_seconds = {rng.uniform(low, high):.2f}"
    db = folder / "oracle.db"
    with sandbox_table(kind, folder, trials, suite_id) as (table, leftovers):
        agentmeter("run", str(oracle_suite(folder, suite_id, kind, trials, budget, table)), "--detach", "--db", str(db))
        store = Store(db)
        try:
            if reason == "operator":
                # the moment: solve.sh's long step has started
                kill_each_at(store, db, suite_id, trials, lambda t: step_started(store, t["id"]), "oracle",
                             (lambda: rng.uniform(0.0, 0.5)) if jitter else 0.0)
            return judge_cell(store, suite_id, lambda t: oracle_intact(store, t, reason), leftovers)
        finally:
            store.close()
