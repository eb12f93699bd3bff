"""The operator's everyday paths around a run (issue 24, item 9): Ctrl-C on a headless run,
`status` after the run, the replies of pause/resume/budget, `run` on a complete store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.core.runpaths_support import gated_slow, run_status, start_gated, wait_run_ended
from tests.waiting import wait_for

SLOW = FIXTURES / "suites" / "slow"


def test_status_after_the_run_prints_the_last_runs_summary(db):
    agentmeter("run", str(SLOW), "--headless", "--db", str(db), check=True)
    result = agentmeter("status", "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert "run 1 of suite slow finished" in result.stdout and "6 passed" in result.stdout, result.stdout
    assert json.loads(agentmeter("status", "--json", "--db", str(db), check=True).stdout)["last_run"]["statuses"] \
        == {"passed": 6}


def test_run_on_a_complete_store_says_so_and_starts_nothing(db):
    agentmeter("run", str(SLOW), "--headless", "--db", str(db), check=True)
    for mode in ("--headless", "--detach"):
        result = agentmeter("run", str(SLOW), mode, "--db", str(db))
        assert result.returncode == 0, result.stderr
        assert "suite slow is complete" in result.stdout and "runner started" not in result.stdout, result.stdout
    assert len(list(Store(db).db.query("select id from runs"))) == 1


def test_pause_resume_and_budget_answer_in_words(tmp_path, db):
    _suite, gate, store = start_gated(tmp_path, db)
    replies = {op: agentmeter(op, "--db", str(db), check=True).stdout for op in ("pause", "resume")}
    assert replies["pause"].startswith("paused: no new trial starts") and replies["resume"].startswith("resumed")
    trial = store.trials("slow", "status = 'running'")[0]["id"]
    said = agentmeter("budget", "--trial", str(trial), "--tokens", "50000", "--db", str(db), check=True).stdout
    assert said.strip() == f"trial {trial}: budget now 50,000 tokens, 1800 s"
    said = agentmeter("budget", "--usd", "2.5", "--db", str(db), check=True).stdout
    assert said.strip() == "every running trial and the rest of the run: $2.5"
    raw = agentmeter("budget", "--usd", "3", "--json", "--db", str(db), check=True).stdout
    assert json.loads(raw) == {"budget": {"usd": 3.0}}
    gate.touch()
    assert wait_run_ended(store) == "finished"


def test_ctrl_c_on_a_headless_run_detaches_and_says_how_to_stop(tmp_path, db):
    suite, gate = gated_slow(tmp_path)
    # As from a terminal: SIGINT at its default, whatever this process inherited (a shell
    # without job control starts background jobs with SIGINT ignored, and so would the client).
    client = subprocess.Popen([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db",
                               str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for(lambda: db.exists() and len(Store(db).trials("slow", "status = 'running'")) == 2, "two trials running")
    os.kill(client.pid, signal.SIGINT)
    _out, err = client.communicate(timeout=900)
    assert client.returncode == 130
    assert "the runner goes on" in err and f"agentmeter stop --db {db}" in err, err
    store = Store(db)
    assert run_status(store) == "running"  # the runner was not stopped by the client's Ctrl-C
    gate.touch()
    assert wait_run_ended(store) == "finished"
    assert len(store.trials("slow", "status = 'passed'")) == 6
