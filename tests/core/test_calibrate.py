"""``agentmeter calibrate``: derive tiers, grids and tau from a store; print, or write with --write."""

from __future__ import annotations

import tomllib

import pytest

from agentmeter_tui.cli import main
from agentmeter_tui.core.reporting.records import import_records
from agentmeter_tui.core.reporting.synthetic import synthetic_records
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.load import load_suite

SUITE_TOML = """\
# A hand-written suite: comments and layout must survive calibrate --write.
[suite]
id = "synthetic"   # same id as the synthetic records
trials = 2

[[models]]
id = "synth-a"
provider = "remote"

[[models]]
id = "synth-b"
provider = "remote"

[[clis]]
adapter = "claude-code"

[[clis]]
adapter = "codex"

[providers.remote]
kind = "openai"
base_url = "http://127.0.0.1:9"

[scoring]
alpha = 0.6  # the paper's
"""


@pytest.fixture
def suite_and_db(tmp_path):
    folder = tmp_path / "synthetic"
    folder.mkdir()
    (folder / "suite.toml").write_text(SUITE_TOML)
    for i in range(9):
        task = folder / f"task-{i:03d}"
        task.mkdir()
        (task / "task.toml").write_text('[task]\ntier = "easy"\n\n[verifier]\ncommand = "true"\n')
        (task / "instruction.md").write_text(f"Do thing {i}.\n")
    db = tmp_path / "r.db"
    store = Store(db)
    import_records(store, list(synthetic_records(models=2, clis=2, tasks=9, trials=2, seed=11)))
    store.close()
    return folder, db


def test_calibrate_prints_without_writing(suite_and_db, capsys):
    folder, db = suite_and_db
    before = (folder / "suite.toml").read_text()
    assert main(["calibrate", str(folder), "--db", str(db), "--tasks"]) == 0
    out = capsys.readouterr().out
    assert "Tiers: 3 easy, 3 medium, 3 hard" in out and "Would write into" in out
    assert "[scoring.grids]" in out and "[scoring.tiers]" in out and "task-008" in out
    assert (folder / "suite.toml").read_text() == before


def test_calibrate_write_keeps_formatting_and_reloads(suite_and_db, capsys):
    folder, db = suite_and_db
    assert main(["calibrate", str(folder), "--db", str(db), "--write"]) == 0
    assert "Wrote [scoring]" in capsys.readouterr().out
    text = (folder / "suite.toml").read_text()
    assert text.startswith("# A hand-written suite") and 'id = "synthetic"   # same id' in text
    assert "alpha = 0.6  # the paper's" in text
    scoring = load_suite(folder).spec.scoring
    assert set(scoring.grids) == set(scoring.tau) == {"easy", "medium", "hard"}
    assert sorted(scoring.tiers.values()).count("hard") == 3
    assert all(g == sorted(g) for g in scoring.grids.values())
    # The report picks the calibrated settings up once the store knows the suite folder.
    store = Store(db)
    store.db.execute("update suites set path = ? where id = 'synthetic'", [str(folder)])
    store.db.conn.commit()
    store.close()
    assert main(["report", "--db", str(db), "--format", "json"]) == 0
    import orjson

    data = orjson.loads(capsys.readouterr().out)
    assert data["budgets"]["hard"]["grid"] == scoring.grids["hard"]
    # Calibrating again replaces the tables rather than adding more.
    assert main(["calibrate", str(folder), "--db", str(db), "--write", "--keep-tiers"]) == 0
    again = tomllib.loads((folder / "suite.toml").read_text())
    assert again["scoring"]["tiers"] == tomllib.loads(text)["scoring"]["tiers"]
    assert (folder / "suite.toml").read_text().count("[scoring.grids]") == 1


def test_calibrate_errors(suite_and_db, tmp_path, capsys):
    folder, db = suite_and_db
    assert main(["calibrate", str(folder), "--db", str(tmp_path / "none.db")]) == 1
    assert main(["calibrate", str(folder), "--db", str(db), "--quantiles", "0.5,2"]) == 2
    assert "--quantiles" in capsys.readouterr().err
    (folder / "suite.toml").write_text(SUITE_TOML.replace("alpha = 0.6", "alpha = 'x'"))
    assert main(["calibrate", str(folder), "--db", str(db)]) == 2
    assert "suite.toml:25: field 'scoring.alpha'" in capsys.readouterr().err
    empty = tmp_path / "empty.db"
    Store(empty).close()
    (folder / "suite.toml").write_text(SUITE_TOML)
    assert main(["calibrate", str(folder), "--db", str(empty)]) == 1
    assert "no finished trials" in capsys.readouterr().err
