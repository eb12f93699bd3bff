"""One bad item never aborts an import (issue 24, item 5).

Each importer is given three items from real recordings (tests/fixtures/harbor-jobs,
tests/fixtures/streams), one broken in a single field: a count no store can hold (10**25,
2**63), a negative count, a date in the year 10**292. The bad one is named by file and field
and skipped, the others are imported, the exit code is 1; importing again adds nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentmeter_tui.core.interop.atif import trajectory_from_events, write_trajectory
from agentmeter_tui.core.store import Store
from tests.interop.support import HARBOR_JOBS, STREAMS, stream_rows
from tests.interop.support import cli as run
from tests.interop.test_atif import trial_row


def _job_with(tmp_path: Path, field: str, value: int) -> tuple[Path, Path, int]:
    job = tmp_path / "job"
    shutil.copytree(HARBOR_JOBS / "oracle-mixed", job)
    trials = sorted(p for p in job.iterdir() if (p / "result.json").exists())
    bad = trials[1] / "result.json"
    result = json.loads(bad.read_text())
    result["agent_result"][field] = value
    bad.write_text(json.dumps(result))
    return job, bad, len(trials)


@pytest.mark.parametrize(("field", "value"), [("n_input_tokens", 10**25), ("n_output_tokens", -5),
                                              ("n_cache_tokens", 2**63)])
def test_harbor_trial_with_an_impossible_count_is_skipped_alone(tmp_path, db, field, value):
    job, bad, count = _job_with(tmp_path, field, value)
    code, err = run("import", "harbor", str(job), "--db", str(db))
    assert code == 1, err
    assert f"{bad}: field 'agent_result.{field}'" in err
    assert len(Store(db).trials()) == count - 1
    again = run("import", "harbor", str(job), "--db", str(db))
    assert len(Store(db).trials()) == count - 1 and again[0] == 1


def _trajectories(tmp_path: Path) -> list[Path]:
    files = []
    for scenario in ("write-file", "cache-heavy", "reasoning"):
        rows, usage = stream_rows("codex", scenario)
        trajectory = trajectory_from_events(rows, trial=trial_row("codex", usage), usage_rows=usage)
        files.append(write_trajectory(trajectory, tmp_path / f"{scenario}.json"))
    return files


def test_atif_file_with_a_2_63_metric_is_skipped_alone(tmp_path, db):
    files = _trajectories(tmp_path)
    doc = json.loads(files[1].read_text())
    step = next(i for i, s in enumerate(doc["steps"]) if s.get("metrics"))
    doc["steps"][step]["metrics"]["prompt_tokens"] = 2**63
    files[1].write_text(json.dumps(doc))
    code, err = run("import", "atif", *map(str, files), "--db", str(db))
    assert code == 1, err
    assert f"{files[1]}: field 'steps.{step}.metrics.prompt_tokens'" in err
    assert len(Store(db).trials()) == 2


SESSION = STREAMS / "claude-code" / "write-file.session.jsonl"


def test_session_with_a_timestamp_of_1e300_is_skipped_alone(tmp_path, db):
    project = tmp_path / "home" / ".claude" / "projects" / "-proj"
    project.mkdir(parents=True)
    good = SESSION.read_bytes()
    (project / "aaaa.jsonl").write_bytes(good)
    lines = good.splitlines(keepends=True)
    first = json.loads(lines[0])
    first["timestamp"] = 1e300
    (project / "bbbb.jsonl").write_bytes(json.dumps(first).encode() + b"\n" + b"".join(lines[1:]))
    code, err = run("import", "sessions", "--cli", "claude-code", str(project.parent), "--db", str(db))
    assert code == 1, err
    assert f"{project / 'bbbb.jsonl'}: field 'timestamp'" in err
    assert [json.loads(r["extra"])["session"]["id"] for r in Store(db).trials()] == ["aaaa"]


def _records(tmp_path: Path) -> Path:
    """Trial records as export-trials writes them, of a real Harbor job."""
    source = tmp_path / "source.db"
    assert run("import", "harbor", str(HARBOR_JOBS / "oracle-mixed"), "--db", str(source))[0] == 0
    out = tmp_path / "records.jsonl"
    assert run("export-trials", "--db", str(source), "--out", str(out))[0] == 0
    return out


def test_import_trials_twice_adds_nothing_the_second_time(tmp_path, db):
    records = _records(tmp_path)
    count = len(records.read_text().splitlines())
    code, err = run("import-trials", str(records), "--db", str(db))
    assert code == 0, err
    assert len(Store(db).trials()) == count
    code, err = run("import-trials", str(records), "--db", str(db))
    assert code == 0, err
    assert len(Store(db).trials()) == count
    assert f"{count} already in the store" in err


def test_import_trials_bad_record_is_named_and_the_rest_imported(tmp_path, db):
    records = _records(tmp_path)
    lines = records.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["tokens"]["output"] = 2**63
    lines[1] = json.dumps(bad)
    records.write_text("\n".join(lines) + "\n")
    code, err = run("import-trials", str(records), "--db", str(db))
    assert code == 1, err
    assert f"{records}:2: field 'tokens.output'" in err
    assert len(Store(db).trials()) == len(lines) - 1
