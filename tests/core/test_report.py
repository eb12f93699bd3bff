"""Reports built from runs, records and a store; their Markdown, CSV and JSON forms."""

from __future__ import annotations

import csv
import io

import orjson
import pytest

from agentmeter_tui.core.metrics import Attempt
from agentmeter_tui.core.reporting.records import import_records
from agentmeter_tui.core.reporting import (
    build_report,
    read_task_list,
    render_csv,
    render_json,
    render_markdown,
    report_from_records,
    report_from_store,
)
from agentmeter_tui.core.reporting.synthetic import synthetic_records
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.suitefile import Scoring
from agentmeter_tui.core.tomlerrors import InputError

TIERS = {"e1": "easy", "e2": "easy", "m1": "medium", "h1": "hard"}
SCORING = Scoring(grids={"easy": [0.1], "medium": [0.5], "hard": [1.0]}, tau={"easy": 0.2, "medium": 0.5, "hard": 2.0})


def r(task, trial, status, cost, model="m", cli="x", tokens=100, id=None):
    passed = status == "passed"
    return Attempt(task, model, cli, trial, status, passed, 1.0 if passed else 0.0, tokens, cost, 0, 2, 1,
               f"2026-06-0{trial + 1}T00:00:00", id)


# m/x, two trials per cell. Latest (trial 1): e1 pass $.05, e2 pass $.05, m1 fail $.9 (expensive),
# h1 pass $.5. Median (lower middle of two): e1 fail, e2 pass $.3, m1 fail $.9, h1 pass $1.5.
# m/y: every attempt infra-invalid.
RUNS = [
    r("e1", 0, "failed", 0.05), r("e1", 1, "passed", 0.05),
    r("e2", 0, "passed", 0.3), r("e2", 1, "passed", 0.05),
    r("m1", 0, "passed", 0.2), r("m1", 1, "failed", 0.9),
    r("h1", 0, "passed", 1.5), r("h1", 1, "passed", 0.5),
    *(r(t, 0, "infra-invalid", 0.01, cli="y", tokens=10) for t in TIERS),
]


def test_tier_scores_known_by_hand_latest():
    report = build_report(RUNS, suite="s", task_tiers=TIERS, scoring=SCORING)
    x = report.configuration("m", "x")
    assert x.tier_scores == {"easy": pytest.approx(1.0), "medium": 0.0, "hard": pytest.approx(1.0)}
    assert x.ams == pytest.approx(2 / 3)
    assert x.passes == 3 and x.passes_by_tier == {"easy": 2, "medium": 0, "hard": 1}
    assert x.tokens_per_pass == pytest.approx(800 / 6)  # 8 attempts, 6 passing runs among them
    assert x.usd_per_pass == pytest.approx((0.05 + 0.05 + 0.3 + 0.05 + 0.2 + 0.9 + 1.5 + 0.5) / 6)
    assert x.delta_best == 0.0
    y = report.configuration("m", "y")
    assert y.passes == 0 and y.ams == 0.0 and y.tokens_per_pass is None and y.usd_per_pass is None
    assert y.delta_best == pytest.approx(2 / 3)


def test_tier_scores_known_by_hand_median():
    report = build_report(RUNS, suite="s", task_tiers=TIERS, scoring=SCORING, selection="median")
    x = report.configuration("m", "x")
    assert x.tier_scores == {"easy": pytest.approx(0.3), "medium": 0.0, "hard": pytest.approx(0.6)}
    assert x.ams == pytest.approx(0.3)
    assert x.passes == 2
    assert report.selection == "median" and "median" in render_markdown(report)


def test_scoring_tiers_override_and_alpha():
    scoring = Scoring(alpha=1.0, grids=SCORING.grids, tau=SCORING.tau, tiers={"m1": "easy", "nope": "hard"})
    report = build_report(RUNS, suite="s", task_tiers=TIERS, scoring=scoring)
    x = report.configuration("m", "x")
    assert report.tier_sizes == {"easy": 3, "medium": 0, "hard": 1, "none": 0}
    assert x.tiers["medium"] is None
    assert x.tier_scores["easy"] == pytest.approx((2 / 3) * (1 - 1 / 3))  # m1's costly failure is now easy's
    assert report.alpha == 1.0
    assert any("no medium tasks" in n for n in report.notes)


def test_defaults_to_table1_without_grids():
    report = build_report(RUNS, suite="s", task_tiers=TIERS)
    assert report.budgets["hard"].grid == (0.06, 0.21, 0.87, 2.34, 3.47)
    assert "Table 1" in report.budgets_source


def test_untiered_tasks_are_noted():
    report = build_report([r("u1", 0, "passed", 0.01)], suite="s")
    row = report.configurations[0]
    assert row.ams is None and row.passes == 1 and report.tier_sizes["none"] == 1
    assert any("no tier" in n for n in report.notes)
    assert "—" in render_markdown(report)


JSON_TOP = {"suite", "tool_version", "seed_prompt_hash", "selection", "alpha", "budgets", "configurations", "trials"}
JSON_CONFIG = {"model", "cli", "passes", "n_tasks", "passes_by_tier", "tokens_per_pass", "usd_per_pass",
               "tier_scores", "ams", "delta_best"}


def test_json_keys_are_fixed():
    report = build_report(RUNS[:8], suite="s", task_tiers=TIERS, scoring=SCORING)
    data = orjson.loads(render_json(report))
    assert set(data) == JSON_TOP
    assert data["budgets"] == {"easy": {"grid": [0.1], "tau": 0.2}, "medium": {"grid": [0.5], "tau": 0.5},
                               "hard": {"grid": [1.0], "tau": 2.0}}
    (config,) = data["configurations"]
    assert set(config) == JSON_CONFIG
    assert set(config["passes_by_tier"]) == set(config["tier_scores"]) == {"easy", "medium", "hard"}
    detailed = orjson.loads(render_json(report, detail=True))["configurations"][0]["detail"]
    assert detailed["tiers"]["easy"]["cbq"] == [1.0] and detailed["tiers"]["medium"]["efr"] == 1.0


def test_markdown_marks_best_values_and_groups_models():
    report = build_report(RUNS, suite="s", task_tiers=TIERS, scoring=SCORING)
    text = render_markdown(report)
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| Model | CLI | Pass ↑ | P(E/M/H) | Tok/P ↓ | USD/P ↓ | S_E ↑ | S_M ↑ | S_H ↑ | AMS ↑")
    x_row = next(line for line in lines if "| x |" in line)
    y_row = next(line for line in lines if "| y |" in line)
    assert x_row.startswith("| m | x | **3**/4 | 2/0/1 |") and "**0.667**" in x_row
    assert y_row.startswith("|  | y | 0/4 | 0/0/0 | — | — |")  # model shown once per group
    assert "Budgets (USD) from the suite's [scoring] section" in text


def test_csv_has_table2_columns_as_numbers():
    report = build_report(RUNS, suite="s", task_tiers=TIERS, scoring=SCORING)
    rows = list(csv.reader(io.StringIO(render_csv(report))))
    assert rows[0] == ["Model", "CLI", "Pass", "N", "P_E", "P_M", "P_H", "Tok/P", "USD/P", "S_E", "S_M", "S_H",
                       "AMS", "delta_best", "Selection", "Tool version"]
    assert rows[1][:7] == ["m", "x", "3", "4", "2", "0", "1"] and float(rows[1][12]) == pytest.approx(2 / 3, abs=1e-6)
    assert rows[2][7] == "" and rows[2][8] == ""  # no pass: empty, not 0


def test_rubric_table_and_winrates():
    runs = [r("e1", 0, "passed", 0.1, id=1), r("e1", 0, "passed", 0.1, cli="y", id=2),
            r("e2", 0, "passed", 0.1, id=3), r("e2", 0, "failed", 0.1, cli="y", id=4),
            r("m1", 0, "infra-invalid", 0.1, id=5)]
    report = build_report(runs, suite="s", task_tiers=TIERS, scores={1: 3, 2: 3, 3: 1, 4: 2, 5: 3}, own="y")
    table = report.rubric
    assert table.winners == {"e1": [("m", "x"), ("m", "y")], "e2": [("m", "y")]}
    assert report.configuration("m", "x").rubric_winrate == 0.5
    assert report.configuration("m", "y").rubric_winrate == 1.0
    assert table.ignored_scores == 1 and table.trials_scored == 4
    assert not table.gate.passed
    data = orjson.loads(render_json(report))
    assert data["configurations"][1]["rubric_winrate"] == 1.0 and "rubric" in data
    text = render_markdown(report)
    assert "Honesty gate: FAILED" in text and "| e1 | **3** | **3** | tie |" in text


def test_rank_validation_on_a_subset(tmp_path):
    records = list(synthetic_records(models=3, clis=2, tasks=12, trials=1, seed=3))
    listing = tmp_path / "core.txt"
    listing.write_text("# core subset\ntask-000\ntask-004  # medium\n\ntask-008\ntask-001\n")
    subset = read_task_list(listing)
    assert subset == ["task-000", "task-004", "task-008", "task-001"] and subset.lines["task-001"] == 6
    report = report_from_records(records, subset=subset, subset_source=str(listing))
    v = report.validation
    assert v.n == 6 and v.spearman is not None and len(v.rows) == 6
    assert "## Rank validation" in render_markdown(report)
    assert orjson.loads(render_json(report))["validation"]["configurations"] == 6
    bad = tmp_path / "bad.txt"
    bad.write_text("task-000\ntask-999\n")
    with pytest.raises(InputError, match=r"bad.txt:2: field 'task': not a task of the suite: task-999"):
        report_from_records(records, subset=read_task_list(bad))


def test_task_list_errors_name_file_and_line(tmp_path):
    path = tmp_path / "list.txt"
    path.write_text("a\nb\na\n")
    with pytest.raises(InputError, match="list.txt:3"):
        read_task_list(path)
    path.write_text("# nothing\n")
    with pytest.raises(InputError, match="empty"):
        read_task_list(path)
    with pytest.raises(InputError, match="not found"):
        read_task_list(tmp_path / "missing.txt")


def test_report_from_store_reads_suite_scoring(tmp_path):
    store = Store(tmp_path / "r.db")
    records = list(synthetic_records(models=2, clis=2, tasks=6, trials=2, seed=5, suite="demo"))
    import_records(store, records)
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "suite.toml").write_text('[suite]\nid = "demo"\nown = "codex"\n\n[scoring]\nalpha = 0.5\n'
                                       '[scoring.grids]\neasy = [0.2]\n')
    store.db.execute("update suites set path = ? where id = 'demo'", [str(folder)])
    store.db.conn.commit()
    report = report_from_store(store, "demo", rubric=True)
    assert report.alpha == 0.5 and report.budgets["easy"].grid == (0.2,)
    assert "Table 1 defaults for the rest" in report.budgets_source
    assert report.own == "codex" and not report.rubric.gate.passed  # nothing scored yet
    from_records = report_from_records(records, scoring=Scoring(alpha=0.5, grids={"easy": [0.2]}))
    assert [c.ams for c in report.configurations] == [c.ams for c in from_records.configurations]
    (folder / "suite.toml").write_text('[suite]\nid = "demo"\n\n[scoring]\nalpha = 2\n')
    with pytest.raises(InputError, match=r"suite.toml:5: field 'scoring.alpha'"):
        report_from_store(store, "demo")
    with pytest.raises(LookupError, match="no suite 'other'"):
        report_from_store(store, "other")
    store.close()
