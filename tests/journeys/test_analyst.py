"""The analyst's day: runs made elsewhere come in, each batch with one bad item (a Harbor trial
whose input count is 10**25, a trial record with a 2**63 token count), each import names the bad
item by file and field, keeps the rest and says so in its exit code; the report screen in the
real TUI shows the imported configurations; and the published report equals the report of a
store that imported only the good items."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.interop.support import HARBOR_JOBS

from .support import TmuxSession, agentmeter, clean_env, command, report

pytestmark = [pytest.mark.slow]

JOB = HARBOR_JOBS / "oracle-mixed"  # a real Harbor job folder (tests/fixtures/harbor-jobs, see its README)


@pytest.fixture(autouse=True)
def _tmux() -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (.ci/run installs it)")


def _trial_folders(job: Path) -> list[Path]:
    return sorted(p for p in job.iterdir() if (p / "result.json").is_file())


def _spoil_one(job: Path) -> Path:
    """The second trial's result.json with an input count no store can hold."""
    bad = _trial_folders(job)[1] / "result.json"
    result = json.loads(bad.read_text())
    result["agent_result"]["n_input_tokens"] = 10**25
    bad.write_text(json.dumps(result))
    return bad


def test_imports_with_a_bad_item_each_then_the_report(tmp_path):
    job = tmp_path / "analyst" / JOB.name  # the same job name in both stores: the same suite id
    shutil.copytree(JOB, job)
    bad = _spoil_one(job)
    analyst = tmp_path / "analyst.db"
    done = command("import", "harbor", str(job), "--db", str(analyst))
    assert done.returncode == 1, done.stderr  # something was skipped
    assert f"{bad}: field 'agent_result.n_input_tokens'" in done.stderr
    assert "Traceback" not in done.stderr

    # The same job without the bad trial, imported cleanly: the store the report must equal.
    clean_job = tmp_path / "clean" / JOB.name
    shutil.copytree(JOB, clean_job)
    shutil.rmtree(clean_job / bad.parent.name)
    clean = tmp_path / "clean.db"
    done = command("import", "harbor", str(clean_job), "--db", str(clean))
    assert done.returncode == 0, done.stderr

    # Trial records from the analyst's store, one line spoiled, into a third store.
    records = tmp_path / "trials.jsonl"
    assert command("export-trials", "--db", str(analyst), "--out", str(records)).returncode == 0
    lines = records.read_text().splitlines()
    spoiled = json.loads(lines[0])
    spoiled["tokens"]["output"] = 2**63
    records.write_text("\n".join([json.dumps(spoiled), *lines]) + "\n")  # the bad one first, the good ones after
    third = tmp_path / "third.db"
    done = command("import-trials", str(records), "--db", str(third))
    assert done.returncode == 1, done.stderr
    assert f"{records}:1: field 'tokens.output'" in done.stderr

    # The report screen of the real TUI shows the imported configurations.
    tui = TmuxSession(agentmeter("review", "--db", str(analyst)), clean_env(tmp_path, AGENTMETER_REVIEWER="ana"))
    try:
        tui.wait_for("Review")
        tui.keys("t")
        tui.wait_for("Table 2")
        screen = tui.wait_for("oracle")  # the table, once the report is built on the store thread
        assert "Report unavailable" not in screen, screen
        tui.keys("q")
    finally:
        tui.close()

    # What gets published: the same tables from the analyst's store, the records' store and a
    # clean import of only the good trials.
    published = report(analyst, "--format", "json")
    assert published == report(clean, "--format", "json")
    tables = {k: v for k, v in json.loads(published).items() if k != "notes"}  # notes name the trials' source
    assert {k: v for k, v in json.loads(report(third, "--format", "json")).items() if k != "notes"} == tables
    assert len(tables["configurations"]) >= 1
