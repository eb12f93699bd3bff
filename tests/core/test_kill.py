"""Budgets and kills: a runaway is stopped within 2 s of crossing its budget, every process it
started is gone (a setsid'd background job included), and its partial usage is kept."""

from __future__ import annotations

import time
from datetime import datetime

import psutil

from agentmeter_tui.core.procs import TOKEN_VAR
from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter

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
    result = agentmeter("run", str(RUNAWAY), "--headless", "--db", str(db), timeout=60)
    assert result.returncode == 0, result.stderr
    store = Store(db)
    trials = {t["model"]: t for t in store.trials("runaway")}
    burner, sleeper, thrasher = trials["burner"], trials["sleeper"], trials["thrasher"]

    assert burner["status"] == "killed" and burner["reason"] == "budget:tokens"
    raw = sum(burner[c] for c in ("uncached_input", "cached_input", "cache_write", "output", "reasoning"))
    assert raw >= 20000  # every completed call's usage is kept
    # Killed within 2 s of the usage event that crossed the budget.
    running_total, crossed_at = 0, None
    for seq, ts, kind, stream, text, data in store.events(burner["id"]):
        if kind == "usage":
            row = next(store.db.query("select * from usage where trial_id = ? and seq = ?", [burner["id"], seq]))
            running_total += sum(row[c] for c in ("uncached_input", "cached_input", "cache_write", "output",
                                                  "reasoning"))
            if running_total >= 20000 and crossed_at is None:
                crossed_at = ts
    finished = datetime.fromisoformat(burner["finished_at"]).timestamp()
    assert crossed_at is not None
    assert finished - crossed_at < 2.0

    assert sleeper["status"] == "killed" and sleeper["reason"] == "budget:time"
    assert thrasher["status"] == "killed" and "thrash" in (thrasher["flags"] or "")
    for trial in trials.values():
        assert processes_of(trial["proc_token"]) == [], f"{trial['model']} left processes behind"


def test_operator_kill_over_the_control_socket(db):
    agentmeter("run", str(RUNAWAY), "--detach", "--db", str(db), check=True)
    store = Store(db)
    deadline = time.monotonic() + 20
    sleeper = None
    while time.monotonic() < deadline:
        rows = store.trials("runaway", "model = 'sleeper' and status = 'running'")
        if rows:
            sleeper = rows[0]
            break
        time.sleep(0.05)
    assert sleeper is not None
    started = time.monotonic()
    result = agentmeter("kill", str(sleeper["id"]), "--db", str(db))
    assert result.returncode == 0, result.stderr
    while time.monotonic() < deadline:
        row = store.trial(sleeper["id"])
        if row["status"] == "killed":
            break
        time.sleep(0.02)
    assert row["status"] == "killed" and row["reason"] == "operator"
    assert time.monotonic() - started < 2.0
    assert processes_of(sleeper["proc_token"]) == []
    agentmeter("stop", "--db", str(db))
