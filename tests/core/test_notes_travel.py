"""Notes written with ``n`` in review travel with the scores (issue 24, item 4).

Review's ``n`` stores a note through ``store.reviews.add_note`` (the ``notes`` table), apart from a
score's own note (``score --note``). ``scores export`` must write it, ``scores import`` and
``scores merge`` must bring it into another store, and running either again doubles nothing.
The trials are a real Harbor job's (tests/fixtures/harbor-jobs), imported into each store."""

from __future__ import annotations

import csv
import io

from agentmeter_tui.core.store import Store
from tests.interop.support import HARBOR_JOBS
from tests.interop.support import cli as run


def _store(path) -> Store:
    assert run("import", "harbor", str(HARBOR_JOBS / "oracle-mixed"), "--db", str(path))[0] == 0
    return Store(path)


def _notes(store: Store) -> list[tuple]:
    keys = {k.id: k.match for k in store.reviews.trial_keys()}
    return sorted((keys[t], n["author"], n["text"], n["created_at"])
                  for t in keys for n in store.views.notes(t))


def _reviewed(tmp_path) -> Store:
    store = _store(tmp_path / "a.db")
    first, second = (t["id"] for t in store.trials()[:2])
    store.reviews.add_score(first, 2, "ana")
    store.reviews.add_note(first, "the test passes but the file is empty, line 3", "ana")
    store.reviews.add_note(second, "no score yet: asked Ben", "ana")
    return store


def test_export_writes_review_notes_and_import_brings_them_back(tmp_path, capsys):
    source = _reviewed(tmp_path)
    out = tmp_path / "scores.csv"
    assert run("scores", "export", "--db", str(source.path), "--out", str(out))[0] == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    notes = {"the test passes but the file is empty, line 3", "no score yet: asked Ben"}
    assert {r["note"] for r in rows} >= notes
    target = _store(tmp_path / "b.db")
    assert run("scores", "import", str(out), "--db", str(target.path))[0] == 0
    assert run("scores", "import", str(out), "--db", str(target.path))[0] == 0  # again: nothing doubled
    assert _notes(target) == _notes(source) and len(_notes(target)) == 2
    assert len(target.reviews.score_rows()) == 1


def test_merge_copies_review_notes_once(tmp_path, capsys):
    source = _reviewed(tmp_path)
    target = _store(tmp_path / "b.db")
    code, err = run("scores", "merge", str(source.path), "--db", str(target.path))
    assert code == 0, err
    assert "2 note(s)" in capsys.readouterr().out
    assert run("scores", "merge", str(source.path), "--db", str(target.path))[0] == 0
    assert _notes(target) == _notes(source) and len(_notes(target)) == 2
    assert len(target.reviews.score_rows()) == 1
