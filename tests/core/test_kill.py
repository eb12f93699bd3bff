"""Budgets and kills: a runaway is stopped on the usage event that crosses its budget, every
process it started is gone (a setsid'd background job included), and its partial usage is kept."""

from __future__ import annotations

import shutil

import psutil

from agentmeter_tui.core.procs import TOKEN_VAR
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES
from tests.conftest import FIXTURES, agentmeter
from tests.waiting import wait_for

RUNAWAY = FIXTURES / "suites" / "runaway"


def processes_of(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(TOKEN_VAR) == token:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def test_budgets_kill_runaways_and_leave_no_process(db):
    result = agentmeter("run", str(RUNAWAY), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr
    store = Store(db)
    trials = {t["model"]: t for t in store.trials("runaway")}
    burner, sleeper, thrasher = trials["burner"], trials["sleeper"], trials["thrasher"]

    assert burner["status"] == "killed" and burner["reason"] == "budget:tokens"
    raw = sum(burner[c] for c in TOKEN_CLASSES)
    assert raw >= 20000  # every completed call's usage is kept
    # The kill was decided on the usage event that crossed the budget, not on a later one:
    # the runner's note names the total it saw, which is the running total at the crossing.
    # (How soon after the crossing the processes were gone is a speed figure: benchmarks/kill_latency.py.)
    running_total, at_crossing, kill_note = 0, None, None
    for seq, _ts, kind, stream, text, _data in store.events(burner["id"]):
        if kind == "usage" and at_crossing is None:
            row = next(store.db.query("select * from usage where trial_id = ? and seq = ?", [burner["id"], seq]))
            running_total += sum(row[c] for c in TOKEN_CLASSES)
            at_crossing = running_total if running_total >= 20000 else None
        if stream == "runner" and text.startswith("killing: "):
            kill_note = text
    assert at_crossing is not None
    assert kill_note == f"killing: budget:tokens ({at_crossing} >= 20000)"

    assert sleeper["status"] == "killed" and sleeper["reason"] == "budget:time"
    assert thrasher["status"] == "killed" and "thrash" in (thrasher["flags"] or "")
    for trial in trials.values():
        assert processes_of(trial["proc_token"]) == [], f"{trial['model']} left processes behind"


def test_operator_kill_over_the_control_socket(db, tmp_path):
    suite = tmp_path / "runaway"
    shutil.copytree(RUNAWAY, suite)  # no time budget: only the operator stops the sleeper
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text().replace("wall_seconds = 20",
                                                                                 "wall_seconds = 3600"))
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    store = Store(db)
    sleeper = wait_for(lambda: store.trials("runaway", "model = 'sleeper' and status = 'running'"), "the sleeper")[0]
    result = agentmeter("kill", str(sleeper["id"]), "--db", str(db))
    assert result.returncode == 0, result.stderr
    row = wait_for(lambda: (r := store.trial(sleeper["id"]))["finished_at"] and r, "the sleeper's final row")
    assert row["status"] == "killed" and row["reason"] == "operator"
    assert processes_of(sleeper["proc_token"]) == []
    agentmeter("stop", "--db", str(db))
