"""The operator's kill while the verifier runs: the runner acknowledges it, so it must stop the
verifier (its test.sh, which would pass) and end the trial killed with no verdict. Before this
test the kill was acknowledged and dropped: the trial ended passed (test.sh sleeps 30 s, then
passes: on that code this test fails on the status, not on a timeout)."""

from __future__ import annotations

import shutil

from agentmeter_tui.core.procs import processes_with_token
from agentmeter_tui.core.run.control import ControlClient
from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.core.test_kill import processes_of
from tests.waiting import wait_for

ANSWER = """description = "answers at once: the verifier is what runs long"
[[turns]]
text = "done"
usage = { uncached_input = 1500, cached_input = 500, output = 40 }
"""


def test_a_kill_during_verification_stops_the_verifier_and_gives_no_verdict(tmp_path, db):
    suite = tmp_path / "runaway"
    shutil.copytree(FIXTURES / "suites" / "runaway", suite)
    text = (suite / "suite.toml").read_text()
    for model in ("sleeper", "thrasher"):
        text = text.replace(f'[[models]]\nid = "{model}"\n\n', "")
    (suite / "suite.toml").write_text(text.replace("wall_seconds = 20", "wall_seconds = 3600"))
    (suite / "scenarios" / "burner.toml").write_text(ANSWER)
    (suite / "spin" / "tests" / "test.sh").write_text("#!/bin/sh\necho verifying\nsleep 30\nexit 0\n")
    (suite / "spin" / "task.toml").write_text('[task]\ntier = "hard"\n[verifier]\ntimeout_sec = 900\n')
    agentmeter("run", str(suite), "--detach", "--db", str(db))
    store = Store(db)
    try:
        trial = wait_for(lambda: (rows := store.trials("runaway", "status = 'verifying'")) and rows[0])
        # the moment: test.sh itself runs (a process of the trial that names it)
        wait_for(lambda: any("test.sh" in " ".join(p.cmdline()) for p in processes_of(trial["proc_token"])))
        with ControlClient(db) as client:
            assert client.request("kill", trial=trial["id"])["ok"]
        done = wait_for(lambda: (row := store.trial(trial["id"]))["finished_at"] and row)
        assert (done["status"], done["reason"]) == ("killed", "operator"), dict(done)
        assert done["verifier_output"] is None and not done["passed"]
        assert not processes_with_token(trial["proc_token"])
        notes = [e for e in store.events(trial["id"]) if e[3] == "runner" and (e[4] or "").startswith("killing: ")]
        assert len(notes) == 1
        wait_for(lambda: store.runs.last_run_status() == "finished")
    finally:
        store.close()
