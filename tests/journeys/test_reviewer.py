"""The reviewer's day: a sighted pass in the review screen (scores with the keys, a note with
`n`), a second reviewer's blind pass, then the scores and notes carried to another machine's
store (`export-trials` / `import-trials`, `scores merge`), where the published rubric report
must equal the first store's."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from agentmeter_tui.core.store import Store

from .support import SMOKE, TmuxSession, agentmeter, clean_env, command, report, typed

pytestmark = [pytest.mark.slow]

NOTE = "reads data.txt twice; <b>fine</b> otherwise"


@pytest.fixture(autouse=True)
def _tmux() -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (.ci/run installs it)")


def _cell(store: Store, trial_id: int) -> tuple:
    row = store.trial(trial_id)
    return (row["task_id"], row["model"], row["cli"], row["trial_index"])


def _scores_and_notes(db: Path) -> tuple[set, set]:
    store = Store(db)
    try:
        scores = {(_cell(store, s.trial_id), s.score, s.reviewer, s.note, s.blind or 0) for s in store.reviews.score_rows()}
        notes = {(_cell(store, t["id"]), n["text"], n["author"]) for t in store.trials() for n in store.views.notes(t["id"])}
    finally:
        store.close()
    return scores, notes


def test_review_score_note_blind_export_merge(tmp_path):
    first = tmp_path / "reviewed.db"
    done = command("run", str(SMOKE), "--headless", "--db", str(first))
    assert done.returncode == 0, done.stderr

    ana = TmuxSession(agentmeter("review", "--db", str(first)), clean_env(tmp_path, AGENTMETER_REVIEWER="ana"))
    try:
        screen = ana.wait_for("Review #")
        opened = int(re.search(r"Review #(\d+)", screen).group(1))
        ana.keys("3")
        ana.wait_for("saved by ana")
        ana.keys("n")
        ana.wait_for(f"Note on trial #{opened}")
        typed(ana, NOTE)
        ana.wait_for("otherwise")  # every character in the note's field before it is saved
        ana.keys("C-s")
        ana.wait_for("Note saved.")
        ana.keys("]")  # the next unscored trial
        ana.wait_for(f"Review #{opened + 1}" if opened < 8 else "Review #")
        ana.wait_for("not scored")  # the next trial's score panel, before its key
        ana.keys("1")
        ana.wait_for("saved by ana")
        ana.keys("q")
    finally:
        ana.close()

    bob = TmuxSession(agentmeter("review", "--db", str(first), "--blind"),
                      clean_env(tmp_path, AGENTMETER_REVIEWER="bob"))
    try:
        screen = bob.wait_for("Blind review")
        for name in ("solver", "fumbler", "reference"):
            assert name not in screen, f"the blind screen shows {name}:\n{screen}"
        bob.keys("2")
        bob.wait_for("saved by bob")
        bob.keys("q")
    finally:
        bob.close()

    scores, notes = _scores_and_notes(first)
    assert {(reviewer, score) for _, score, reviewer, _, _ in scores} == {("ana", 3), ("ana", 1), ("bob", 2)}
    assert {(reviewer, blind) for _, _, reviewer, _, blind in scores} == {("ana", 0), ("bob", 1)}
    assert [text for _, text, author in notes] == [NOTE]

    # Another machine: the trials as records, then the scores and notes merged from the first store.
    records = tmp_path / "trials.jsonl"
    assert command("export-trials", "--db", str(first), "--out", str(records)).returncode == 0
    second = tmp_path / "other.db"
    assert command("import-trials", str(records), "--db", str(second)).returncode == 0
    merged = command("scores", "merge", str(first), "--db", str(second))
    assert merged.returncode == 0, merged.stderr
    assert _scores_and_notes(second) == (scores, notes)
    again = command("scores", "merge", str(first), "--db", str(second))  # nothing doubles
    assert again.returncode == 0 and _scores_and_notes(second) == (scores, notes)

    # The published report, with the rubric, is the same from either store, but for the note
    # that names where the second store's trials came from and the seed-prompt hash, which trial
    # records do not carry (docs/trial-record.md).
    def tables(db: Path) -> dict:
        return {k: v for k, v in json.loads(report(db, "--rubric", "--format", "json")).items()
                if k not in ("notes", "seed_prompt_hash")}

    assert tables(second) == tables(first)
    assert tables(first)["rubric"]["trials_scored"] == 3
