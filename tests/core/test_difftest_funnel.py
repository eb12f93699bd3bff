"""The differential funnel's pure parts: snapshots and side-effect diffs, matching, scoring."""

from __future__ import annotations

import os

import pytest

from agentmeter_tui.core.difftest.cases import FileSpec, place_files
from agentmeter_tui.core.difftest.executor import BuildResult, CaseRun
from agentmeter_tui.core.difftest.funnel import (
    FunnelReport,
    class_scores,
    exact_match,
    judge_case,
    macro_scores,
    runtime_summary,
    similarity,
)
from agentmeter_tui.core.difftest.report import render_text
from agentmeter_tui.core.difftest.snapshot import SideEffects, is_hidden, snapshot


def test_snapshot_diff_by_content_ignoring_hidden_paths(tmp_path):
    place_files(tmp_path, [FileSpec(path="a.txt", text="a"), FileSpec(path="sub/b.txt", text="b"),
                           FileSpec(path="gone.txt", text="x"), FileSpec(path=".cache/old", text="1")])
    before = snapshot(tmp_path)
    assert ".cache" not in before and ".cache/old" not in before
    assert before["sub"] == "<dir>"
    (tmp_path / "a.txt").write_text("changed")
    (tmp_path / "sub" / "b.txt").touch()  # a new mtime, same content: not a side effect
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "new.txt").write_text("n")
    (tmp_path / ".cache" / "new").write_text("cache")
    (tmp_path / "sub" / ".tmp").mkdir()
    (tmp_path / "sub" / ".tmp" / "x").write_text("x")
    effects = SideEffects.between(before, snapshot(tmp_path))
    assert list(effects.created) == ["new.txt"]
    assert list(effects.modified) == ["a.txt"]
    assert effects.deleted == ["gone.txt"]
    assert effects.lines() == ["+ new.txt", "~ a.txt", "- gone.txt"]
    assert SideEffects.from_dict(effects.as_dict()) == effects


def test_hidden_means_any_part_starting_with_a_dot():
    assert is_hidden(".cache/x") and is_hidden("a/.git/config") and is_hidden("a/.env")
    assert not is_hidden("a/b.txt") and not is_hidden("data/x.log")


def test_place_files_back_dates_and_refuses_escapes(tmp_path):
    place_files(tmp_path, [FileSpec(path="old.log", text="x", age_days=10)], now=1_000_000_000)
    assert os.stat(tmp_path / "old.log").st_mtime == pytest.approx(1_000_000_000 - 10 * 86400)
    with pytest.raises(ValueError, match="leaves the workspace"):
        place_files(tmp_path, [FileSpec(path="../escape.txt")])


def test_exact_ignores_all_whitespace_and_fuzzy_is_normalized_levenshtein():
    assert exact_match("a b\n c\t\n", "abc")
    assert not exact_match("deleted 2 files", "removed 2 files")
    assert similarity("deleted 2 files (28 bytes)", "deleted 2 file(s) (28 bytes)") == pytest.approx(1 - 2 / 28)
    assert similarity("", "") == 1.0
    assert similarity("abc", "") == 0.0
    # a re-aligned table is a near match: runs of whitespace collapse first
    assert similarity("a    1\nbb   2\n", "a 1\nbb 2") == 1.0


def run(code, stdout="", effects=None, duration=0.01, timed_out=False):
    return CaseRun(exit_code=code, stdout=stdout, duration=duration, timed_out=timed_out,
                   side_effects=effects or SideEffects())


DELETED = SideEffects(deleted=["data/a.log"])


@pytest.mark.parametrize("candidate, expect", [
    (run(0, "deleted 1 files", DELETED), {"exec": True, "side_effects": True, "exact": True, "fuzzy": True}),
    (run(0, "deleted 1 files", SideEffects()), {"exec": True, "side_effects": False, "exact": False, "fuzzy": False}),
    (run(0, " deleted 1\tfiles\n", DELETED), {"exec": True, "side_effects": True, "exact": True, "fuzzy": True}),
    (run(0, "deleted 1 file", DELETED), {"exec": True, "side_effects": True, "exact": False, "fuzzy": True}),
    (run(0, "nothing at all", DELETED), {"exec": True, "side_effects": True, "exact": False, "fuzzy": False}),
    (run(1, "deleted 1 files", DELETED), {"exec": False, "side_effects": False, "exact": False, "fuzzy": False}),
    (run(None, "", timed_out=True), {"exec": False, "side_effects": False, "exact": False, "fuzzy": False}),
])
def test_positive_case_funnel(candidate, expect):
    verdict = judge_case("c", "c#1", ["x"], None, run(0, "deleted 1 files", DELETED), candidate)
    assert verdict.positive
    assert {k: getattr(verdict, k) for k in expect} == expect
    assert verdict.reject is None


@pytest.mark.parametrize("candidate, reject", [
    (run(2), True),  # any non-zero exit is fine: error codes are not compared
    (run(1, "some message on stdout"), True),  # stdout of a refused command is not compared
    (run(0), False),  # it accepted what the oracle refused
    (run(2, effects=SideEffects(created={"x": "h"})), False),  # it refused, but touched files
    (run(None, timed_out=True), False),
])
def test_negative_case_is_judged_by_reject_only(candidate, reject):
    verdict = judge_case("c", "c#1", ["x"], None, run(2, "usage"), candidate, expected_exit=2)
    assert not verdict.positive and verdict.reject is reject
    assert not verdict.exec and not verdict.oracle_drift


def test_oracle_drift_when_the_oracle_changes_sign():
    assert judge_case("c", "c#1", [], None, run(1), run(1), expected_exit=0).oracle_drift
    assert not judge_case("c", "c#1", [], None, run(0), run(0), expected_exit=0).oracle_drift


def test_macro_average_over_classes_and_zero_without_build():
    oracle = run(0, "ok")
    verdicts = [
        judge_case("small", "s1", [], None, oracle, run(0, "ok")),  # class small: 1/1
        judge_case("big", "b1", [], None, oracle, run(0, "ok")),  # class big: 1/3
        judge_case("big", "b2", [], None, oracle, run(1)),
        judge_case("big", "b3", [], None, oracle, run(1)),
        judge_case("big", "n1", [], None, run(2), run(0)),  # negative: not in the funnel
        judge_case("only-negative", "o1", [], None, run(2), run(2)),
    ]
    classes = class_scores(verdicts, ["small", "big", "only-negative"])
    assert [(c.positives, c.negatives) for c in classes] == [(1, 0), (3, 1), (0, 1)]
    scores = macro_scores(classes, built=True, semantic_on=False)
    assert scores["exec"] == pytest.approx((1 + 1 / 3) / 2)  # macro, not 2/4 micro
    assert scores["reject"] == pytest.approx((0 + 1) / 2)
    assert scores["semantic"] is None and scores["build"] == 1.0
    failed = macro_scores(classes, built=False, semantic_on=False)
    assert failed["build"] == 0.0 and failed["exec"] == 0.0 and failed["fuzzy"] == 0.0


def test_runtime_ratio_is_ratio_of_means_and_per_case():
    verdicts = [judge_case("c", "1", [], None, run(0, duration=0.010), run(0, duration=0.020)),
                judge_case("c", "2", [], None, run(0, duration=0.030), run(0, duration=0.020)),
                judge_case("c", "3", [], None, run(0, duration=0.030), run(None, timed_out=True, duration=10))]
    assert verdicts[0].runtime_ratio == pytest.approx(2.0)
    assert verdicts[2].runtime_ratio is None
    summary = runtime_summary(verdicts)
    assert summary["cases"] == 2
    assert summary["ratio"] == pytest.approx(1.0)
    assert summary["oracle_ms"] == pytest.approx(20.0)


def test_details_are_json_able_and_text_names_failing_cases():
    import json

    oracle = run(0, "deleted 1 files", DELETED)
    verdicts = [judge_case("sweep", "sweep#01", ["data", "--older-than", "7"], None, oracle,
                           run(0, "deleted 1 files", SideEffects())),
                judge_case("sweep", "sweep#02", ["data"], None, oracle, run(0, "deleted 1 files", DELETED))]
    report = FunnelReport("fuzzy", BuildResult(True), BuildResult(True), verdicts,
                          class_scores(verdicts, ["sweep"]))
    details = json.loads(json.dumps(report.as_dict()))
    assert details["scores"]["fuzzy"] == 0.5 and details["score"] == 0.5
    failing, clean = details["cases"]
    assert failing["oracle"]["side_effects"]["deleted"] == ["data/a.log"]
    assert failing["candidate"]["side_effects"]["deleted"] == []
    assert failing["oracle"]["stdout"] == failing["candidate"]["stdout"] == "deleted 1 files"
    assert "stdout" not in clean["oracle"]  # a clean case keeps only exit codes and times
    assert "stdout" in report.as_dict(full=True)["cases"][1]["oracle"]
    text = render_text(details)
    assert "sweep#01  [SideFx]" in text and "-data/a.log" in text and "(none)" in text
    assert "sweep#02" not in text
    assert "Fuzzy     50.0%  <- R" in text


def record(model, task, status, scores=None, attempt=0, trial=1, ratio=None):
    from agentmeter_tui.core.reporting.records import TrialRecord
    from agentmeter_tui.core.usage import TokenUsage

    extra = {"attempt": attempt} if attempt else {}
    if scores is not None:
        extra["verifier"] = {"kind": "differential", "scores": scores, "runtime": {"ratio": ratio}}
    return TrialRecord(suite="s", task=task, tier=None, model=model, cli="reference", trial=trial, status=status,
                       passed=status == "passed", quality=0.0, tokens=TokenUsage(), cost_usd=None,
                       cost_source=None, turns=0, tool_calls=0, started_at=None, finished_at=None, extra=extra)


def test_funnel_per_configuration_from_trial_records():
    from agentmeter_tui.core.difftest.summary import funnel_markdown, funnel_rows

    full = {"build": 1.0, "exec": 1.0, "side_effects": 1.0, "exact": 0.5, "fuzzy": 1.0, "semantic": None}
    broken = {"build": 0.0, "exec": 0.0, "side_effects": 0.0, "exact": 0.0, "fuzzy": 0.0, "semantic": None}
    records = [
        record("a", "t1", "passed", full, ratio=2.0),
        record("a", "t2", "failed", broken),
        record("a", "t3", "killed"),  # killed before judging: 0 everywhere
        record("a", "t4", "infra-invalid"),  # our failure: left out
        record("b", "t1", "infra-invalid", attempt=0),
        record("b", "t1", "passed", full, attempt=1, ratio=0.5),  # the retry counts
        record("b", "t9", "passed", None),  # another verifier kind: not in the funnel
    ]
    rows = {r.model: r.as_dict() for r in funnel_rows(records)}
    assert rows["a"]["trials"] == 3
    assert rows["a"]["build"] == pytest.approx(1 / 3) and rows["a"]["exact"] == pytest.approx(0.5 / 3)
    assert rows["a"]["semantic"] is None  # off in every judged trial
    assert rows["a"]["runtime_ratio"] == 2.0
    assert rows["b"]["trials"] == 1 and rows["b"]["fuzzy"] == 1.0 and rows["b"]["semantic"] is None
    table = funnel_markdown(funnel_rows(records))
    assert "| a | reference | 3 | 33.3 | 33.3 | 33.3 | 16.7 | 33.3 | - | 2.00 |" in table
    by_task = funnel_rows(records, by_task=True)
    assert [(r.model, r.task) for r in by_task] == [("a", "t1"), ("a", "t2"), ("a", "t3"), ("b", "t1")]


def test_difftest_report_command_reads_records(tmp_path, capsys):
    from agentmeter_tui.cli import main
    from agentmeter_tui.core.reporting.records import write_records

    path = tmp_path / "records.jsonl"
    full = {"build": 1.0, "exec": 1.0, "side_effects": 0.5, "exact": 0.5, "fuzzy": 0.5, "semantic": None}
    with open(path, "wb") as handle:
        write_records([record("m", "t1", "failed", full, ratio=1.5)], handle)
    assert main(["difftest", "report", "--records", str(path)]) == 0
    assert "| m | reference | 1 | 100.0 | 100.0 | 50.0 | 50.0 | 50.0 | - | 1.50 |" in capsys.readouterr().out
    assert main(["difftest", "report", "--records", str(path), "--json"]) == 0
    assert '"side_effects": 0.5' in capsys.readouterr().out
    assert main(["difftest", "report", "--db", str(tmp_path / "none.db")]) == 2
