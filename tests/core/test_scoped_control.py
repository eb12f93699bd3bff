"""Per-model pause and per-cell limits, live (issue 25): a paused model starts nothing while
the other runs on; a cell's new token budget applies to its trials once it resumes."""

from __future__ import annotations

import json

from tests.conftest import agentmeter
from tests.core.runpaths_support import start_gated, wait_run_ended
from tests.waiting import wait_for


def test_a_paused_model_starts_nothing_while_the_other_runs_and_a_cell_limit_applies(tmp_path, db):
    _suite, gate, store = start_gated(tmp_path, db)  # steady and steady2, 3 trials each, 2 at a time
    out = agentmeter("pause", "--model", "steady", "--db", str(db), check=True).stdout
    assert "steady: paused" in out
    gate.touch()
    wait_for(lambda: len(store.trials("slow", "model = 'steady2' and status = 'passed'")) == 3,
             "the other model's three trials")
    progress = json.loads(agentmeter("status", "--json", "--db", str(db), check=True).stdout)["progress"]
    assert progress["paused_models"] == ["steady"] and progress["running"] == 0 and progress["queued"] == 2
    assert len(store.trials("slow", "model = 'steady'")) == 1  # the one running at the pause, nothing more
    # a cell limit below the first call's 1,020 tokens, then resume: its two trials are stopped by it
    agentmeter("budget", "--model", "steady", "--cli", "reference", "--tokens", "1000", "--db", str(db), check=True)
    agentmeter("resume", "--model", "steady", "--db", str(db), check=True)
    assert wait_run_ended(store) == "finished"
    later = store.trials("slow", "model = 'steady'")[1:]
    assert [(r["status"], r["reason"]) for r in later] == [("killed", "budget:tokens")] * 2
