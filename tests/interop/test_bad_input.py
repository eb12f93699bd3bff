"""Bad input to the importers: each names the file (and line), skips that item, imports the
rest, and exits 1 with the count of what it skipped. The good items are real recordings
(tests/fixtures/streams, tests/fixtures/harbor-jobs); the bad ones are those broken on purpose."""

from __future__ import annotations

import json
import shutil

from agentmeter_tui.core.interop.atif import trajectory_from_events, write_trajectory
from agentmeter_tui.core.store import Store
from tests.interop.support import STREAMS, stream_rows
from tests.interop.support import cli as run
from tests.interop.test_atif import trial_row

SESSION = STREAMS / "claude-code" / "write-file.session.jsonl"


def test_sessions_bad_utf8_and_huge_line_are_named_and_skipped(tmp_path, db):
    store = tmp_path / "home" / ".claude" / "projects" / "-proj"
    store.mkdir(parents=True)
    good = SESSION.read_bytes()
    lines = good.splitlines(keepends=True)
    (store / "aaaa.jsonl").write_bytes(good)
    (store / "bbbb.jsonl").write_bytes(lines[0] + b'{"type": "user", "message": {"content": "caf\xe9"}}\n' + lines[1])
    (store / "cccc.jsonl").write_bytes(lines[0] + lines[1] + b'{"type": "user", "pad": "' + b"x" * (10 << 20)
                                       + b'"}\n')
    code, err = run("import", "sessions", "--cli", "claude-code", str(store.parent), "--db", str(db))
    assert code == 1
    assert f"{store / 'bbbb.jsonl'}:2: not UTF-8" in err
    assert f"{store / 'cccc.jsonl'}:3: line longer than 8 MiB" in err
    assert "2 item(s) skipped" in err
    assert [json.loads(r["extra"])["session"]["id"] for r in Store(db).trials()] == ["aaaa"]


def test_atif_wrong_schema_is_named_and_the_rest_imported(tmp_path, db):
    rows, usage = stream_rows("codex", "write-file")
    good = write_trajectory(trajectory_from_events(rows, trial=trial_row("codex", usage), usage_rows=usage),
                            tmp_path / "good.json")
    doc = json.loads(good.read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**doc, "steps": [{**doc["steps"][0], "source": "robot"}]}))
    not_json = tmp_path / "cut.json"
    not_json.write_bytes(good.read_bytes()[:100])
    code, err = run("import", "atif", str(bad), str(good), str(not_json), "--db", str(db))
    assert code == 1
    assert f"{bad}: field 'steps.0.source'" in err
    assert f"{not_json}: not valid JSON" in err
    assert "2 item(s) skipped" in err
    assert len(Store(db).trials()) == 1


def test_harbor_truncated_result_is_named_and_the_rest_imported(tmp_path, db, harbor_jobs):
    job = tmp_path / "job"
    shutil.copytree(harbor_jobs / "oracle-mixed", job)
    trials = sorted(p for p in job.iterdir() if (p / "result.json").exists())
    cut = trials[0] / "result.json"
    cut.write_bytes(cut.read_bytes()[:200])
    code, err = run("import", "harbor", str(job), "--db", str(db))
    assert code == 1
    assert f"skipped {cut}: " in err and "1 item(s) skipped" in err
    assert len(Store(db).trials()) == len(trials) - 1


def test_usage_errors_exit_2_without_touching_the_store(tmp_path, db):
    code, err = run("import", "sessions", "--cli", "nope", "--db", str(db))
    assert code == 2 and "--cli nope: no session reader for it; known: claude-code, codex" in err
    code, err = run("import", "sessions", "--cli", "codex", str(tmp_path / "missing"), "--db", str(db))
    assert code == 2 and f"{tmp_path / 'missing'}: no such folder" in err
    bad_prices = tmp_path / "prices.toml"
    bad_prices.write_text("as_of = [\n")
    code, err = run("import", "harbor", str(tmp_path), "--prices", str(bad_prices), "--db", str(db))
    assert code == 2 and f"--prices: {bad_prices}" in err
    assert not db.exists()
