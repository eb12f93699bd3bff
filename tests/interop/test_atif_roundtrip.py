"""``export atif`` then ``import atif`` over every trial of the demo suite, run for real (the
reference agent against the scripted model server): the same events in the same order, the
same five token classes, and every exported file valid under Harbor's own trajectory model."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TokenUsage
from tests.conftest import ROOT, agentmeter
from tests.interop.support import cli, harbor_validate


@pytest.mark.slow
def test_demo_suite_round_trips_through_atif(tmp_path):
    source_db, back_db, out = tmp_path / "demo.db", tmp_path / "back.db", tmp_path / "atif"
    run = agentmeter("run", str(ROOT / "suites" / "demo"), "--headless", "--db", str(source_db), timeout=600)
    assert run.returncode == 0, run.stderr
    code, err = cli("export", "atif", "--suite", "demo", "--out", str(out), "--db", str(source_db))
    assert code == 0, err
    source = Store(source_db)
    trials = source.trials("demo")
    files = sorted(out.glob("trial-*/trajectory.json"))
    assert len(files) == len(trials) >= 30  # 30 planned, and the retries of infra-invalid attempts
    assert {p: e for p, e in harbor_validate(files).items() if e} == {}
    code, err = cli("import", "atif", *map(str, files), "--db", str(back_db))
    assert code == 0, err
    back = Store(back_db)
    def key(t: dict) -> tuple:
        return t["task_id"], t["model"], t["cli"], t["trial_index"], t["attempt"]

    imported = {key(t): t for t in back.trials("demo")}
    assert len(imported) == len(trials)
    for trial in trials:
        copy = imported[key(trial)]
        assert (copy["status"], copy["passed"], copy["quality"]) == (trial["status"], trial["passed"], trial["quality"])
        assert TokenUsage.from_dict(copy) == TokenUsage.from_dict(trial)
        ours = [(kind, text) for _seq, _ts, kind, _stream, text, _data in source.events(trial["id"])]
        theirs = [(kind, text) for _seq, _ts, kind, _stream, text, _data in back.events(copy["id"])]
        assert theirs == ours
        assert copy["source"] == "atif"
    again = cli("import", "atif", *map(str, files), "--db", str(back_db))[1]
    assert f"imported 0 trajectory(ies), {len(files)} already in the store" in again
