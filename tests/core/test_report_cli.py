"""``agentmeter report`` and ``agentmeter score`` end to end on a store."""

from __future__ import annotations

import importlib.util

import orjson
import pytest

from agentmeter_tui import __version__
from agentmeter_tui.cli import main
from agentmeter_tui.core.reporting.records import import_records, write_records
from agentmeter_tui.core.reporting.synthetic import synthetic_records
from agentmeter_tui.core.store import Store

CONFIG_KEYS = {"model", "cli", "passes", "n_tasks", "passes_by_tier", "tokens_per_pass", "usd_per_pass",
               "tier_scores", "ams", "delta_best"}


@pytest.fixture(scope="module")
def grid_db(tmp_path_factory):
    """24 configurations x 90 tasks x 3 trials (plus infra-invalid retries) in a store."""
    path = tmp_path_factory.mktemp("grid") / "r.db"
    store = Store(path)
    import_records(store, list(synthetic_records(models=6, clis=4, tasks=90, trials=3)))
    store.close()
    return path


def test_report_json_for_the_full_grid(grid_db, capsys):
    assert main(["report", "--db", str(grid_db), "--format", "json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["suite"] == "synthetic" and data["selection"] == "latest" and data["alpha"] == 0.6
    assert len(data["configurations"]) == 24
    for config in data["configurations"]:
        assert set(config) == CONFIG_KEYS
        assert config["n_tasks"] == 90
        assert sum(config["passes_by_tier"].values()) == config["passes"]
        assert 0 <= config["ams"] <= 1 and config["delta_best"] >= 0
    assert sorted(c["delta_best"] for c in data["configurations"])[:6] == [0.0] * 6


@pytest.mark.skipif(importlib.util.find_spec("agentmeter_tui.commands.trials") is None,
                    reason="agentmeter import-trials not built yet")
def test_import_trials_then_report(tmp_path, capsys):
    jsonl = tmp_path / "t.jsonl"
    with jsonl.open("wb") as handle:
        write_records(synthetic_records(models=6, clis=4, tasks=90, trials=3), handle)
    db = tmp_path / "r.db"
    assert main(["import-trials", str(jsonl), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--format", "json"]) == 0
    assert len(orjson.loads(capsys.readouterr().out)["configurations"]) == 24


def test_report_formats_and_out_file(grid_db, tmp_path, capsys):
    out = tmp_path / "report.md"
    assert main(["report", "--db", str(grid_db), "--out", str(out), "--select", "median"]) == 0
    text = out.read_text()
    assert text.startswith("# AgentMeter report: synthetic") and "median trial per cell" in text
    assert main(["report", "--db", str(grid_db), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Model,CLI,Pass,N,P_E,P_M,P_H") and lines[0].endswith(",Selection,Tool version")
    assert len(lines[1:lines.index("")]) == 24 and all(line.endswith(f",latest,{__version__}") for line in lines[1:25])


def test_report_validate_and_bad_task_list(grid_db, tmp_path, capsys):
    core = tmp_path / "core30.txt"
    core.write_text("".join(f"task-{i:03d}\n" for i in range(0, 90, 3)))
    assert main(["report", "--db", str(grid_db), "--format", "json", "--validate", str(core)]) == 0
    validation = orjson.loads(capsys.readouterr().out)["validation"]
    assert validation["configurations"] == 24 and -1 <= validation["spearman"] <= 1
    core.write_text("task-000\nno-such-task\n")
    assert main(["report", "--db", str(grid_db), "--validate", str(core)]) == 2
    assert "core30.txt:2: field 'task'" in capsys.readouterr().err


def test_report_errors(tmp_path, capsys):
    assert main(["report", "--db", str(tmp_path / "none.db")]) == 1
    assert "no store" in capsys.readouterr().err
    db = tmp_path / "r.db"
    store = Store(db)
    import_records(store, list(synthetic_records(models=1, clis=1, tasks=3, trials=1)))
    store.close()
    assert main(["report", "--db", str(db), "--suite", "other"]) == 1
    assert "no suite 'other'" in capsys.readouterr().err


def _scored_store(tmp_path, own_wins: int, own_losses: int, unscored: int):
    """Two configurations, one trial per task; the suite names ('m', 'ours') as its own."""
    records = list(synthetic_records(models=1, clis=2, tasks=own_wins + own_losses + unscored, trials=1,
                                     infra_rate=0.0))
    db = tmp_path / "rubric.db"
    store = Store(db)
    import_records(store, records)
    store.db.execute("update suites set own = 'synth-a|claude-code'")
    store.db.conn.commit()
    trials = {(t["task_id"], t["cli"]): t["id"] for t in store.trials()}
    store.close()
    tasks = sorted({task for task, _ in trials})
    scores = []
    for i, task in enumerate(tasks):
        if i < own_wins:
            scores += [(trials[(task, "claude-code")], 3), (trials[(task, "codex")], 2)]
        elif i < own_wins + own_losses:
            scores += [(trials[(task, "claude-code")], 1), (trials[(task, "codex")], 3)]
        else:
            scores += [(trials[(task, "codex")], 2)]
    return db, scores


def test_honesty_gate_exit_code(tmp_path, capsys, monkeypatch):
    db, scores = _scored_store(tmp_path, own_wins=10, own_losses=0, unscored=0)
    monkeypatch.setenv("AGENTMETER_REVIEWER", "alice")
    for trial_id, score in scores:
        assert main(["score", str(trial_id), str(score), "--db", str(db)]) == 0
    out = tmp_path / "never.md"
    assert main(["report", "--db", str(db), "--rubric", "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert "honesty gate failed" in err and "loses 0 of 10" in err and not out.exists()
    assert main(["report", "--db", str(db)]) == 0  # without --rubric the gate is not asked


def test_honesty_gate_passes_with_two_losses_and_winrate_0_7(tmp_path, capsys):
    db, scores = _scored_store(tmp_path, own_wins=7, own_losses=2, unscored=1)
    for trial_id, score in scores:
        assert main(["score", str(trial_id), str(score), "--db", str(db), "--by", "bob"]) == 0
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--rubric", "--format", "json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    winrates = {c["cli"]: c["rubric_winrate"] for c in data["configurations"]}
    assert winrates == {"claude-code": pytest.approx(0.7), "codex": pytest.approx(0.3)}
    assert data["rubric"]["honesty_gate"]["passed"] is True


def test_score_command(tmp_path, capsys, monkeypatch):
    db = tmp_path / "r.db"
    store = Store(db)
    import_records(store, list(synthetic_records(models=1, clis=1, tasks=3, trials=1, infra_rate=0.0)))
    trial_id = store.trials()[0]["id"]
    store.close()
    monkeypatch.setenv("AGENTMETER_REVIEWER", "carol")
    assert main(["score", str(trial_id), "2", "--note", "one retry", "--db", str(db)]) == 0
    assert main(["score", str(trial_id), "3", "--by", "dave", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    # dave's score stands beside carol's (both kept); it replaces only dave's own (issue 24 item 13)
    assert "score 2 by carol" in out and "score 3 by dave (also scored by carol: 2)" in out
    store = Store(db)
    history = store.reviews.score_history(trial_id)
    assert [(s.score, s.reviewer, s.note) for s in history] == [(2, "carol", "one retry"), (3, "dave", None)]
    assert store.reviews.latest_scores()[trial_id].score == 3
    store.close()
    assert main(["score", "9999", "1", "--db", str(db)]) == 1
    assert "no trial 9999" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["score", str(trial_id), "4", "--db", str(db)])


def test_a_reviewers_second_score_says_what_it_replaced(tmp_path, capsys):
    """Issue 24 item 13: "(was 1 by root)" after another reviewer's score read as an overwrite;
    a reviewer's own earlier score is what a new one replaces."""
    db = tmp_path / "r.db"
    store = Store(db)
    import_records(store, list(synthetic_records(models=1, clis=1, tasks=1, trials=1, infra_rate=0.0)))
    trial_id = store.trials()[0]["id"]
    store.close()
    assert main(["score", str(trial_id), "1", "--by", "root", "--db", str(db)]) == 0
    assert main(["score", str(trial_id), "1", "--by", "ana", "--db", str(db)]) == 0
    assert main(["score", str(trial_id), "2", "--by", "ana", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].endswith("score 1 by ana (also scored by root: 1)") and "was" not in out[1]
    assert out[2].endswith("score 2 by ana (was 1)")
