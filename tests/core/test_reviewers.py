"""Several reviewers: agreement against the libraries, agreed scores, adjudication, blind order and
masking, scores export/import/merge, and the report's ``agreement`` section."""

from __future__ import annotations

import csv
import json
import random
import sqlite3

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from agentmeter_tui.cli import main
from agentmeter_tui.core.metrics.agreement import agreement
from agentmeter_tui.core.reporting import report_from_store
from agentmeter_tui.core.review.reviewing import (
    Masker,
    adjudication_queue,
    agreed_scores,
    agreement_from_store,
    blind_order,
    blind_queue,
)
from agentmeter_tui.core.review.scores_io import export_csv, import_csv, merge_store
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.tomlerrors import InputError
from tests.sample_data import build_sample_store

TRIALS = list(range(1, 21))


def _sets() -> dict[str, dict[str, dict[int, int]]]:
    """Reviewer -> trial -> score, for the shapes the issue names."""
    rng = random.Random(15)
    a = {t: rng.randint(0, 3) for t in TRIALS}
    return {
        "perfect": {"ana": a, "bo": dict(a)},
        "none": {"ana": a, "bo": {t: 3 - s for t, s in a.items()}},
        "missing": {"ana": a, "bo": {t: min(3, s + (t % 3 == 0)) for t, s in a.items()},
                    "cy": {t: rng.randint(0, 3) for t in TRIALS[::2]}},
        "ties": {"ana": {t: 2 if t % 5 else 1 for t in TRIALS}, "bo": {t: 2 if t % 4 else 3 for t in TRIALS}},
    }


def _by_trial(by_reviewer: dict[str, dict[int, int]]) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for reviewer, scores in by_reviewer.items():
        for trial, score in scores.items():
            out.setdefault(trial, {})[reviewer] = score
    return out


@pytest.mark.parametrize("shape", ["perfect", "none", "missing", "ties"])
def test_agreement_equals_the_libraries(shape):
    by_reviewer = _sets()[shape]
    result = agreement(_by_trial(by_reviewer))
    reviewers = sorted(by_reviewer)
    for pair in result.pairs:
        shared = sorted(set(by_reviewer[pair.a]) & set(by_reviewer[pair.b]))
        x = [by_reviewer[pair.a][t] for t in shared]
        y = [by_reviewer[pair.b][t] for t in shared]
        assert pair.n == len(shared)
        assert pair.kappa_quadratic == pytest.approx(cohen_kappa_score(x, y, weights="quadratic", labels=[0, 1, 2, 3]))
        assert pair.exact == pytest.approx(np.mean(np.array(x) == np.array(y)))
    data = np.array([[by_reviewer[r].get(t, np.nan) for t in TRIALS] for r in reviewers], dtype=float)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal", value_domain=[0, 1, 2, 3])
    assert result.alpha_ordinal == pytest.approx(expected)
    assert result.n_trials == 20
    if shape == "perfect":
        assert result.pairs[0].kappa_quadratic == 1.0 and result.alpha_ordinal == 1.0
    if shape == "none":
        assert result.pairs[0].kappa_quadratic < 0 and result.pairs[0].exact < 0.5
    if shape == "missing":
        assert {(p.a, p.b): p.n for p in result.pairs} == {("ana", "bo"): 20, ("ana", "cy"): 10, ("bo", "cy"): 10}


def test_undefined_figures_are_none():
    one_value = agreement({1: {"ana": 2, "bo": 2}, 2: {"ana": 2, "bo": 2}})
    assert one_value.pairs[0].kappa_quadratic is None and one_value.alpha_ordinal is None
    assert one_value.pairs[0].exact == 1.0
    alone = agreement({1: {"ana": 2}})
    assert alone.pairs == [] and alone.alpha_ordinal is None and alone.n_trials == 0


@pytest.fixture
def store(tmp_path):
    store = build_sample_store(tmp_path / "s.db", events_per_trial=12, scores=False)
    yield store
    store.close()


def test_agreed_score_is_median_then_adjudicated(store):
    store.reviews.add_score(1, 3, "ana")
    store.reviews.add_score(1, 0, "ana")  # ana's latest counts
    store.reviews.add_score(1, 3, "bo")
    store.reviews.add_score(2, 2, "ana")
    assert agreed_scores(store, "sample") == {1: 1.5, 2: 2.0}
    assert adjudication_queue(store, "sample") == [1]
    assert adjudication_queue(store, "sample", threshold=4) == []
    store.reviews.add_score(1, 1, "judge", "both half right", role="adjudication")
    assert agreed_scores(store, "sample")[1] == 1.0
    assert adjudication_queue(store, "sample") == []
    report = report_from_store(store, "sample", rubric=True)
    ace = ("ace", "reference")
    assert report.rubric.medians[(ace, "count-lines")] == 1.0  # trial 1 is ace/reference count-lines
    [audit] = store.reviews.audit_rows("adjudicate")
    assert (audit["actor"], audit["trial_id"]) == ("judge", 1)


def test_blind_order_reproducible_and_only_unscored(store):
    ids = store.reviews.finished_trial_ids("sample")
    assert blind_order(ids, 7) == blind_order(list(reversed(ids)), 7)
    assert blind_order(ids, 7) != blind_order(ids, 8) and sorted(blind_order(ids, 7)) == sorted(ids)
    store.reviews.add_score(ids[0], 2, "ana")
    store.reviews.add_score(ids[1], 2, "bo")
    queue = blind_queue(store, "sample", "ana", seed=3, reviews=2)
    assert ids[0] not in queue and ids[1] in queue and len(queue) == len(ids) - 1
    assert blind_queue(store, "sample", "ana", seed=3, reviews=1) == [t for t in queue if t != ids[1]]
    assert queue == blind_queue(store, "sample", "ana", seed=3, reviews=2)


def test_masker_hides_names_versions_and_spellings():
    mask = Masker(["claude-sonnet-4-5", "claude-code", "2.0.14", "anthropic", "codex"])
    text = ("Claude Code v2.0.14 started; model: claude-sonnet-4-5 via Anthropic. claude says hi. "
            "Codex 0.46.0 is another CLI. workspace and decodex stay.")
    masked = mask(text)
    for word in ("claude", "Claude", "2.0.14", "sonnet", "Anthropic", "Codex", "0.46.0"):
        assert word not in masked, (word, masked)
    assert "workspace" in masked and "decodex" in masked


def test_export_import_roundtrip(store, tmp_path):
    store.reviews.add_score(1, 3, "ana", "clean, first time")
    store.reviews.add_score(1, 2, "bo", 'has "quotes", commas')
    store.reviews.add_score(2, 0, "ana", blind=True)
    store.reviews.add_score(2, 1, "judge", role="adjudication")
    out = tmp_path / "scores.csv"
    out.write_text(export_csv(store), encoding="utf-8")
    assert next(csv.reader(out.open()))[:5] == ["trial", "reviewer", "score", "note", "time"]
    empty = build_sample_store(tmp_path / "empty.db", events_per_trial=2, scores=False)
    try:
        assert import_csv(empty, out, "2026-01-01T00:00:00") == (4, 0)
        assert import_csv(empty, out, "2026-01-01T00:00:00") == (0, 4)  # again: nothing doubled

        def key(s):
            return [(r.trial_id, r.reviewer, r.score, r.note, r.created_at, r.role) for r in s.reviews.score_rows()]

        assert key(empty) == key(store)
    finally:
        empty.close()


def test_import_rejects_a_bad_row_and_writes_nothing(store, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("trial,reviewer,score\n1,ana,3\n2,bo,7\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        import_csv(store, bad, "2026-01-01T00:00:00")
    assert "bad.csv" in str(error.value) and "bad.csv:3: field 'score'" in str(error.value) and "score" in str(error.value)
    missing = tmp_path / "missing.csv"
    missing.write_text("trial,reviewer,score\n9999,ana,3\n", encoding="utf-8")
    with pytest.raises(InputError, match="no trial 9999"):
        import_csv(store, missing, "2026-01-01T00:00:00")
    assert store.reviews.score_rows() == []


def test_merge_two_stores_loses_nothing(tmp_path):
    first = build_sample_store(tmp_path / "a.db", events_per_trial=2, scores=False)
    # The second machine's store has the same suite but its trials under other ids.
    second = build_sample_store(tmp_path / "b.db", events_per_trial=2, scores=False)
    try:
        second.db.execute("update trials set id = id + 1000")
        second.db.conn.commit()
        first.reviews.add_score(1, 3, "ana")
        first.reviews.add_score(2, 1, "ana")
        second.reviews.add_score(1001, 3, "bo")
        second.reviews.add_score(1002, 2, "bo")
        second.reviews.add_score(1002, 0, "ana")  # a conflict with ana's 1 on the first machine: kept as another review
        shared = second.reviews.score_rows()[0]
        first.reviews.add_score_rows([{"trial_id": 1, "reviewer": "bo", "score": 3, "note": None,
                               "created_at": shared.created_at}])  # already copied once by hand
        result = merge_store(first, second)
        assert (result.added, result.already, result.unmatched) == (2, 1, [])
        rows = [(r.trial_id, r.reviewer, r.score) for r in first.reviews.score_rows()]
        assert sorted(rows) == sorted([(1, "ana", 3), (2, "ana", 1), (1, "bo", 3), (2, "bo", 2), (2, "ana", 0)])
        assert merge_store(first, second).added == 0
    finally:
        first.close()
        second.close()


def test_report_agreement_json_names(tmp_path, capsys):
    db = tmp_path / "s.db"
    store = build_sample_store(db, events_per_trial=2, scores=False)
    rng = random.Random(4)
    for trial in range(1, 21):
        score = rng.randint(0, 3)
        store.reviews.add_score(trial, score, "ana")
        store.reviews.add_score(trial, max(0, score - (trial % 4 == 0)), "bo")
    expected = agreement_from_store(store, "sample")
    store.close()
    assert main(["report", "--db", str(db), "--agreement", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)["agreement"]
    assert set(data) >= {"pairs", "alpha_ordinal", "n_trials", "tasks"}
    [pair] = data["pairs"]
    assert set(pair) == {"a", "b", "n", "kappa_quadratic", "exact"} and (pair["a"], pair["b"], pair["n"]) == ("ana", "bo", 20)
    assert pair["kappa_quadratic"] == pytest.approx(expected.pairs[0].kappa_quadratic)
    assert data["n_trials"] == 20 and set(data["tasks"]) == {"count-lines", "fix-median", "write-greeting"}
    assert main(["report", "--db", str(db), "--agreement"]) == 0
    assert "Reviewer agreement" in capsys.readouterr().out
    assert main(["report", "--db", str(db), "--agreement", "--format", "csv"]) == 0
    assert "Kappa quadratic" in capsys.readouterr().out


def test_scores_commands(tmp_path, capsys):
    db, other = tmp_path / "a.db", tmp_path / "b.db"
    build_sample_store(db, events_per_trial=2, scores=True).close()
    build_sample_store(other, events_per_trial=2, scores=False).close()
    out = tmp_path / "scores.csv"
    assert main(["scores", "export", "--db", str(db), "--out", str(out)]) == 0
    assert main(["scores", "import", str(out), "--db", str(other)]) == 0
    assert "imported 5 score(s)" in capsys.readouterr().out
    assert main(["scores", "merge", str(db), "--db", str(other)]) == 0
    assert "merged 0 score(s)" in capsys.readouterr().out
    with sqlite3.connect(other) as conn:
        assert conn.execute("select count(*) from scores").fetchone()[0] == 5
    assert main(["scores", "export", "--db", str(tmp_path / "nope.db")]) == 1


def test_review_plan_from_suite_toml_and_store(store, tmp_path):
    from agentmeter_tui.core.review.reviewing import review_plan

    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "suite.toml").write_text("[suite]\nid = 'sample'\n\n[review]\nreviews = 3\ndisagreement = 1\n")
    store.db.execute("update suites set path = ? where id = 'sample'", [str(folder)])
    store.db.conn.commit()
    plan = review_plan(store, "sample")
    assert (plan.reviews, plan.disagreement, plan.source) == (3, 1, "suite.toml [review]")
    store.reviews.set_review_plan("sample", 2, None, "ana")
    plan = review_plan(store, "sample")
    assert (plan.reviews, plan.disagreement) == (2, 1) and "store" in plan.source
    (folder / "suite.toml").write_text("[suite]\nid = 'sample'\n\n[review]\nreviews = 0\n")
    with pytest.raises(InputError, match="review.reviews"):
        review_plan(store, "sample")


def test_score_final_and_review_plan_and_compare_commands(tmp_path, capsys):
    import argparse

    from agentmeter_tui.commands.ui import _set_plan

    db = tmp_path / "s.db"
    build_sample_store(db, events_per_trial=2, scores=False).close()
    assert main(["score", "1", "0", "--by", "ana", "--db", str(db)]) == 0
    assert main(["score", "1", "3", "--by", "bo", "--db", str(db)]) == 0
    assert main(["score", "1", "2", "--by", "judge", "--final", "--note", "tests pass, output padded",
                 "--db", str(db)]) == 0
    assert "final score 2 by judge" in capsys.readouterr().out
    args = argparse.Namespace(suite=None, reviews=2, disagreement=3)
    assert _set_plan(db, args) == 0
    store = Store(db)
    try:
        assert agreed_scores(store, "sample") == {1: 2.0}
        assert store.reviews.review_plan("sample") == {"reviews": 2, "disagreement": 3}
    finally:
        store.close()
    assert main(["compare", "1", "9999", "--db", str(db)]) == 1
    assert "no trial 9999" in capsys.readouterr().err


def test_infra_invalid_trials_are_not_offered_nor_scored(store):
    """Issue 38: the queue offered infra-invalid trials and took scores on them (the rubric
    report then dropped them)."""
    from agentmeter_tui.ui.data import review_queue

    first = store.reviews.finished_trial_ids("sample")[0]
    with store.db.conn:
        store.db.execute("update trials set status = 'infra-invalid', reason = 'infra: sandbox failed' "
                         "where id = ?", [first])
    invalid = [r["id"] for r in store.trials("sample", "status = 'infra-invalid'")]
    offered = set(store.reviews.finished_trial_ids("sample")) | {i for i, _ in review_queue(store, "sample")}
    assert offered and not offered & set(invalid)
    assert not set(invalid) & set(blind_queue(store, "sample", "ana", seed=1))
    with pytest.raises(ValueError, match="infra-invalid"):
        store.reviews.add_score(invalid[0], 2, "ana")
    assert invalid[0] not in store.reviews.latest_scores("sample")


def test_an_empty_blind_queue_says_why(store):
    """With one review per trial and every trial reviewed by ana, bob's blind queue is empty and
    adjudication finds nothing: each says why, and how to ask for a second reviewer."""
    from agentmeter_tui.core.review.reviewing import empty_queue_reason

    for trial_id in store.reviews.finished_trial_ids("sample"):
        store.reviews.add_score(trial_id, 2, "ana")
    assert blind_queue(store, "sample", "bob", seed=1) == []
    why = empty_queue_reason(store, "sample", "bob")
    assert why.startswith("every trial has its one review") and "set reviews per trial to 2" in why
    assert "set reviews per trial to 2" in empty_queue_reason(store, "sample", "bob", adjudicating=True)
    assert empty_queue_reason(store, "sample", "ana").startswith("you scored all")
