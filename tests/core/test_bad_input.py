"""Malformed suite and task files: exit 2, a message naming file, line and field, and the
store is not touched (not even created)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import ROOT, agentmeter

SMOKE = ROOT / "suites" / "smoke"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    target = tmp_path / "suite"
    shutil.copytree(SMOKE, target)
    return target


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def dump(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(needle)


CASES = {
    "bad toml": ("suite.toml", "trials = 2", "trials = = 2", None, "invalid TOML"),
    "unknown field": ("suite.toml", "concurrency = 4", "concurrency = 4\nparallelism = 9", "suite.parallelism",
                      "unknown field"),
    "wrong type": ("suite.toml", "trials = 2", 'trials = "two"', "suite.trials", "integer"),
    "unknown adapter": ("suite.toml", 'adapter = "reference"', 'adapter = "no-such-cli"', "clis[0].adapter",
                        "unknown adapter"),
    "task unknown field": ("write-greeting/task.toml", "timeout_sec = 30", "timeout_sec = 30\nretries = 3",
                           "verifier.retries", None),
    "task wrong type": ("write-greeting/task.toml", 'tier = "easy"', "tier = 3", "task.tier", None),
    "task bad tier": ("count-lines/task.toml", 'tier = "medium"', 'tier = "impossible"', "task.tier", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_files_exit_2_naming_file_line_and_field(suite, db, case):
    rel, old, new, field, words = CASES[case]
    path = suite / rel
    edit(path, old, new)
    result = agentmeter("run", str(suite), "--headless", "--db", str(db))
    assert result.returncode == 2, result.stderr
    message = result.stderr
    assert str(path) in message
    first_new_line = new.splitlines()[-1] if "\n" in new else new
    assert f":{line_of(path, first_new_line)}:" in message, message
    if field:
        assert f"field '{field}'" in message, message
    if words:
        assert words in message, message
    assert not db.exists(), "a bad suite must not create or touch the store"


def test_missing_instruction_file(suite, db):
    (suite / "count-lines" / "instruction.md").unlink()
    result = agentmeter("run", str(suite), "--headless", "--db", str(db))
    assert result.returncode == 2
    assert "count-lines/instruction.md" in result.stderr and "field 'instruction'" in result.stderr
    assert not db.exists()


def test_changed_instruction_is_refused_naming_the_task(suite, db):
    agentmeter("run", str(suite), "--headless", "--db", str(db), check=True)
    before = dump(db)
    (suite / "write-greeting" / "instruction.md").write_text("Something else entirely.\n")
    result = agentmeter("run", str(suite), "--headless", "--db", str(db))
    assert result.returncode == 4
    assert "write-greeting" in result.stderr and "seed-prompt hash" in result.stderr
    assert dump(db) == before


def test_a_sandbox_that_fails_its_preflight_stops_the_run_with_exit_6(suite, db):
    with open(suite / "suite.toml", "a") as handle:
        handle.write('\n[sandbox]\nkind = "ssh"\n'
                     'hosts = [{ address = "127.0.0.1", port = 1, user = "root", key = "no-such-key", slots = 1 }]\n')
    result = agentmeter("run", str(suite), "--headless", "--db", str(db))
    assert result.returncode == 6
    assert "cannot start the run" in result.stderr and "no-such-key" in result.stderr
    store_rows = sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0]
    assert store_rows == 0  # no run was recorded as started


def test_two_columns_of_one_adapter_need_variant_names(tmp_path):
    from agentmeter_tui.core.suites.load import load_suite
    from agentmeter_tui.core.tomlerrors import InputError

    suite = tmp_path / "s"
    (suite / "t").mkdir(parents=True)
    (suite / "t" / "instruction.md").write_text("x\n")
    (suite / "t" / "task.toml").write_text('[verifier]\nkind = "none"\n')
    head = '[suite]\nid = "s"\n[[models]]\nid = "m"\nprovider = "none"\n[providers.none]\nkind = "none"\n'
    (suite / "suite.toml").write_text(head + '[[clis]]\nadapter = "reference"\n[[clis]]\nadapter = "reference"\n')
    with pytest.raises(InputError) as caught:
        load_suite(suite)
    assert "clis[1].adapter" in str(caught.value) and "suite.toml:11" in str(caught.value)
    (suite / "suite.toml").write_text(head + '[[clis]]\nadapter = "reference"\n[[clis]]\nadapter = "reference"\n'
                                      'name = "codex:b"\n')
    with pytest.raises(InputError) as caught:
        load_suite(suite)
    assert "clis[1].name" in str(caught.value) and "must start with its adapter" in str(caught.value)
    (suite / "suite.toml").write_text(head + '[[clis]]\nadapter = "reference"\n[[clis]]\nadapter = "reference"\n'
                                      'name = "reference:b"\n')
    loaded = load_suite(suite)
    assert [c.key for c in loaded.configurations()] == ["m|reference", "m|reference:b"]
