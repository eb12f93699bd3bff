"""Local clients cannot starve the runner (issue 23, item 6): while one client floods the
control socket with newlines (reconnecting whenever it is closed), another sends ``status``
requests and never reads a reply, and more connections than the runner keeps open sit idle,
every trial still finishes within its budget and ``agentmeter status`` answers.

On the old runner a flood of 43 MB of newlines made 3-second trials take 54-68 s against a
60 s budget and ``agentmeter status`` time out. How much a flood delays a trial and another
client's ``status`` is a figure of benchmarks/socket_flood.py, not asserted here."""

from __future__ import annotations

import json
import shutil
import threading

from agentmeter_tui.core.run.clients import MAX_CLIENTS
from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.waiting import wait_for

from .flood_support import FLOOD, misbehave

SLOW = FIXTURES / "suites" / "slow"


def test_a_flooding_client_starves_neither_trials_nor_status(db, tmp_path):
    suite = tmp_path / "slow"
    shutil.copytree(SLOW, suite)
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text() + "\n[budgets.default]\nwall_seconds = 30\n")
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    store = Store(db)
    stop = threading.Event()
    clients, idle, flooded = misbehave(db, stop, MAX_CLIENTS + 16)
    try:
        for client in clients:
            client.start()
        wait_for(lambda: flooded[0] >= 8 * len(FLOOD), "the flood to be under way")

        def answered() -> bool:  # the runner answers while it prepares, with a total of 0 until then
            status = agentmeter("status", "--json", "--db", str(db))
            assert status.returncode == 0, status.stderr
            return json.loads(status.stdout)["progress"]["total"] == 6

        wait_for(answered, "`agentmeter status` to answer with the whole grid")
        wait_for(lambda: next(store.db.query("select status from runs"))["status"] == "finished", "the run to finish")
    finally:
        stop.set()
        for sock in idle:
            sock.close()
        for client in clients:
            client.join()
    trials = store.trials("slow")
    assert len(trials) == 6 and {t["status"] for t in trials} == {"passed"}, trials
