"""A run from the command line (issue 34): `agentmeter run DIR -m ... -a ... -k 3 -n 4` on Harbor
task folders with no suite.toml. The user types what they would type for Harbor; the run is a
suite like any other: killed with SIGKILL mid-run, the same command resumes it, `suite show`
prints the suite it implied, and its report equals the report of the equivalent suite.toml
written by hand. The tasks are the Harbor fixture's (tests/fixtures/harbor/tasks: real
Dockerfiles, tests/test.sh writing /logs/verifier/reward.*); the agent is the reference CLI
against the scripted model server, "solver" right and "wrong" wrong on each task."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES
from tests.core.sandbox_support import docker_engine_fixture, unique_id  # noqa: F401 - a fixture
from tests.journeys.support import ROOT, command
from tests.waiting import wait_for

pytestmark = pytest.mark.docker

TASKS = FIXTURES / "harbor" / "tasks"
SCENARIOS = FIXTURES / "harbor" / "agents" / "scenarios"


def grid(suite_id: str) -> list[str]:
    return ["-m", "scripted/solver", "-m", "scripted/wrong", "-a", "reference", "-x", "no-*", "-k", "3", "-n", "4",
            "--scenarios", str(SCENARIOS), "--suite-id", suite_id]


def by_hand(tmp_path, suite_id: str):
    """The suite.toml a person would write for the same grid."""
    folder = tmp_path / "by-hand"
    folder.mkdir()
    shutil.copytree(SCENARIOS, folder / "scenarios")
    (folder / "suite.toml").write_text(f'''[suite]
id = "{suite_id}"
trials = 3
concurrency = 4
tasks_dir = "{TASKS}"
exclude = ["no-*"]

[[models]]
id = "solver"
provider = "scripted"
price_key = "scripted/solver"

[[models]]
id = "wrong"
provider = "scripted"
price_key = "scripted/wrong"

[[clis]]
adapter = "reference"

[providers.scripted]
kind = "scripted"

[sandbox]
kind = "docker"
''')
    return folder


def report_json(db) -> dict:
    done = command("report", "--db", str(db), "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_command_line_run_resumes_after_sigkill_and_reports_as_its_suite_file(tmp_path, docker_engine):
    suite_id = unique_id("cli-grid")
    db = tmp_path / "cli.db"
    args = ["run", str(TASKS), *grid(suite_id), "--db", str(db)]
    started = command(*args, "--detach")
    assert started.returncode == 0, started.stderr + started.stdout
    store = Store(db, readonly=True)
    try:
        runner = wait_for(lambda: next(store.db.query("select pid from runs"), None), "the run's row")["pid"]
        wait_for(lambda: store.trials(suite_id, "status in ('passed', 'failed')")
                 and store.trials(suite_id, "status = 'running'"), "a finished and a running trial")
    finally:
        store.close()
    os.kill(runner, signal.SIGKILL)  # mid-run: some trials final, others running or queued

    resumed = subprocess.run([sys.executable, "-m", "agentmeter_tui", *args, "--headless"], capture_output=True,
                             text=True, cwd=ROOT, timeout=1800)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    # The run ends with the per-configuration table and the command to open the report.
    out = resumed.stdout
    assert "results of suite" in out and "open the report: agentmeter report --db" in out, out
    solver_row = next(line for line in out.splitlines() if line.strip().startswith("solver"))
    assert "9/9" in solver_row and "1.000" in solver_row, out  # 3 tasks x 3 trials, each reward 1
    wrong_row = next(line for line in out.splitlines() if line.strip().startswith("wrong "))
    assert "0/9" in wrong_row and "9 failed" in wrong_row, out

    store = Store(db, readonly=True)
    try:
        final = [t for t in store.trials(suite_id) if t["status"] != "infra-invalid"]
        runs = list(store.db.query("select id from runs"))
    finally:
        store.close()
    cells = {(t["task_id"], t["model"], t["trial_index"]) for t in final}
    assert len(cells) == len(final) == 18 and len(runs) == 2  # every cell once, over the killed run and its resume

    shown = command("suite", "show", "--db", str(db))
    assert shown.returncode == 0 and f'id = "{suite_id}"' in shown.stdout, shown.stderr
    assert "trials = 3" in shown.stdout and "concurrency = 4" in shown.stdout, shown.stdout

    # The equivalent suite.toml, written by hand, and the same command line into a clean store,
    # with no kill: the two reports are equal, figure for figure.
    hand_db, clean_db = tmp_path / "hand.db", tmp_path / "clean.db"
    done = command("run", str(by_hand(tmp_path, suite_id)), "--headless", "--db", str(hand_db))
    assert done.returncode == 0, done.stderr + done.stdout
    done = command("run", str(TASKS), *grid(suite_id), "--headless", "--db", str(clean_db))
    assert done.returncode == 0, done.stderr + done.stdout
    hand = report_json(hand_db)
    assert report_json(clean_db) == hand

    # The killed run's report: the same but for what its lost (infra-invalid) attempts spent,
    # which the report counts in its token sums and says so in a note.
    killed = report_json(db)
    lost, passed = lost_tokens(db, suite_id)
    assert lost, "the kill left no infra-invalid attempt"
    for ours, theirs in zip(killed["configurations"], hand["configurations"], strict=True):
        if theirs["passes"]:  # tokens per pass: every attempt's tokens over the passing attempts (9 each)
            spent = (ours["tokens_per_pass"] - theirs["tokens_per_pass"]) * passed[ours["model"]]
            assert round(spent) == lost.get(ours["model"], 0), (ours, theirs, lost)
        for key in ("tokens_per_pass", "usd_per_pass"):
            ours.pop(key), theirs.pop(key)
    killed.pop("notes"), hand.pop("notes")
    assert killed == hand


def lost_tokens(db, suite_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """Tokens of the infra-invalid attempts per model, summed from the store's raw columns, and
    the passed attempts per model."""
    store = Store(db, readonly=True)
    try:
        rows = store.trials(suite_id, "status = 'infra-invalid'")
        passed = {r["model"]: r["n"] for r in store.db.query(
            "select model, count(*) as n from trials where suite_id = ? and status = 'passed' group by model",
            [suite_id])}
    finally:
        store.close()
    spent: dict[str, int] = {}
    for row in rows:
        spent[row["model"]] = spent.get(row["model"], 0) + sum(
            row[c] or 0 for c in ("uncached_input", "cached_input", "cache_write", "output", "reasoning"))
    return spent, passed
