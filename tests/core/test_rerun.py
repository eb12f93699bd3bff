"""`agentmeter rerun` (issue 25): the cells a reached cap killed run again as new attempts,
appended (the killed trials stay as they were), asked of a running runner and of a finished
store; the report then counts the new attempts (its latest-completed rule)."""

from __future__ import annotations

import json

from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.caps_support import capped_suite, held_on_cap, served_tokens, status
from tests.core.runpaths_support import wait_run_ended


def test_rerun_appends_new_attempts_and_the_report_selects_them(tmp_path, db):
    suite = capped_suite(tmp_path, "\n[budgets.run]\ntokens = 12000\n", proxy=True)
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    store = Store(db)
    before = held_on_cap(db)["progress"]
    killed = {r["id"]: r for r in store.trials("capped", "status = 'killed'")}
    assert killed
    # a running runner takes the killed cells into its queue (held by the cap like the rest)
    out = agentmeter("rerun", "--status", "killed", "--db", str(db), check=True).stdout
    assert f"{len(killed)} cell(s) added" in out
    assert status(db)["progress"]["total"] == before["total"] + len(killed)
    agentmeter("stop", "--db", str(db), check=True)
    wait_run_ended(store)
    # run again under the same cap: the earlier run's spend counts, so nothing starts
    count = len(store.trials("capped"))
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    again = held_on_cap(db)["progress"]
    assert "cap reached: run:" in " ".join(again["held"])
    # the forecast starts from the earlier run's trials: the suite's whole bill, as the caps count it
    assert again["forecast"]["basis"] == count and again["forecast"]["tokens"]["spent"] == served_tokens(store)
    agentmeter("stop", "--db", str(db), check=True)
    wait_run_ended(store)
    assert len(store.trials("capped")) == count
    # on the finished store, once the operator raised the cap in the suite: a runner is started
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text().replace("tokens = 12000", "tokens = 1000000"))
    agentmeter("rerun", "--status", "killed,infra-invalid", "--db", str(db), "--detach", check=True)
    wait_for_finished(store)
    rows = store.trials("capped")
    for trial_id, row in killed.items():  # nothing overwritten
        again = store.trials("capped", "id = ?", [trial_id])[0]
        assert (again["status"], again["reason"]) == (row["status"], row["reason"])
        later = [r for r in rows if (r["task_id"], r["config_id"], r["trial_index"]) ==
                 (row["task_id"], row["config_id"], row["trial_index"]) and r["id"] > trial_id]
        assert [r["status"] for r in later] == ["passed"] and later[0]["attempt"] >= 1
    report = json.loads(agentmeter("report", "--db", str(db), "--format", "json", check=True).stdout)
    assert [(c["model"], c["passes"], c["n_tasks"]) for c in report["configurations"]] == [("m1", 1, 1), ("m2", 1, 1)]


def wait_for_finished(store: Store) -> None:
    from tests.waiting import wait_for

    wait_for(lambda: store.db.execute("select count(*) from runs where status = 'finished'").fetchone()[0] >= 1,
             "the rerun's runner to finish")
