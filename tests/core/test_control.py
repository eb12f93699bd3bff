"""The control socket from the command line: pause/resume, raising a budget, a USD budget."""

from __future__ import annotations

import json
import shutil
import time

from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.core.test_robustness import wait_for

RUNAWAY = FIXTURES / "suites" / "runaway"
SLOW = FIXTURES / "suites" / "slow"


def test_pause_holds_new_trials_and_resume_finishes(db):
    agentmeter("run", str(SLOW), "--detach", "--db", str(db), check=True)
    assert agentmeter("pause", "--db", str(db)).returncode == 0
    store = Store(db)
    time.sleep(1.5)  # trials that were running finish; none may start while paused
    started = len(store.trials("slow"))
    status = json.loads(agentmeter("status", "--json", "--db", str(db), check=True).stdout)
    assert status["progress"]["paused"] is True
    time.sleep(1.0)
    assert len(store.trials("slow")) == started < 6
    assert agentmeter("resume", "--db", str(db)).returncode == 0
    wait_for(lambda: next(store.db.query("select status from runs"))["status"] == "finished", timeout=60)
    assert len(store.trials("slow", "status = 'passed'")) == 6


def test_raise_a_running_trials_budget_then_kill_it(db, tmp_path):
    suite = tmp_path / "runaway"
    shutil.copytree(RUNAWAY, suite)
    burner_file = suite / "scenarios" / "burner.toml"  # slow it down, so the raise lands in time
    burner_file.write_text(burner_file.read_text().replace("delay_ms = 50", "delay_ms = 500"))
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text().replace("wall_seconds = 4",
                                                                                 "wall_seconds = 30"))
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    store = Store(db)
    burner = wait_for(lambda: store.trials("runaway", "model = 'burner' and status = 'running'"))[0]
    reply = agentmeter("budget", "--trial", str(burner["id"]), "--tokens", "100000000", "--wall-seconds", "60",
                       "--db", str(db))
    assert reply.returncode == 0, reply.stderr
    assert json.loads(reply.stdout)["budget"]["tokens"] == 100_000_000
    # It now burns well past its old 20,000-token budget without being stopped.
    wait_for(lambda: store.db.execute("select coalesce(sum(uncached_input + cached_input + output + reasoning), 0) "
                                      "from usage where trial_id = ?", [burner["id"]]).fetchone()[0] > 40_000)
    assert store.trial(burner["id"])["status"] == "running"
    agentmeter("kill", str(burner["id"]), "--db", str(db), check=True)
    row = wait_for(lambda: (r := store.trial(burner["id"]))["status"] == "killed" and r)
    assert row["reason"] == "operator"
    assert row["uncached_input"] > 40_000 * 0.8  # the usage of every completed call is kept
    agentmeter("stop", "--db", str(db))


def test_usd_budget_kills(db, tmp_path):
    suite = tmp_path / "runaway"
    shutil.copytree(RUNAWAY, suite)
    text = (suite / "suite.toml").read_text().replace("tokens = 20000", "tokens = 10000000\nusd = 0.05")
    (suite / "suite.toml").write_text(text)
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=60)
    assert result.returncode == 0, result.stderr
    burner = Store(db).trials("runaway", "model = 'burner'")[0]
    assert burner["status"] == "killed" and burner["reason"] == "budget:usd"
    assert 0.05 <= burner["cost_usd"] < 0.05 + 0.02  # one call is about $0.01
