"""What the importers say (issue 24, item 11): the suite they wrote to, and a folder that is
not the CLI's session store named as such, with a non-zero exit. Recorded inputs only
(tests/fixtures/harbor-jobs, tests/fixtures/streams)."""

from __future__ import annotations

from agentmeter_tui.core.interop.atif import trajectory_from_events, write_trajectory
from tests.interop.support import HARBOR_JOBS, STREAMS, stream_rows
from tests.interop.support import cli as run
from tests.interop.test_atif import trial_row


def test_sessions_folder_of_another_layout_is_named_and_fails(tmp_path, db):
    wrong = tmp_path / "codex-store" / "2026" / "11" / "26"
    wrong.mkdir(parents=True)
    (wrong / "rollout-2026-11-26T04-13-00-00000000-0000-4000-8000-000000000001.jsonl").write_bytes(
        (STREAMS / "codex" / "write-file.session.jsonl").read_bytes())
    code, err = run("import", "sessions", "--cli", "claude-code", str(tmp_path / "codex-store"),
                    "--db", str(db))
    assert code != 0
    assert f"{tmp_path / 'codex-store'}: not a claude-code session store" in err


def test_every_importer_names_the_suite_it_wrote_to(tmp_path, db):
    code, err = run("import", "harbor", str(HARBOR_JOBS / "oracle-mixed"), "--db", str(db))
    assert code == 0 and "suite harbor-oracle-mixed" in err, err
    rows, usage = stream_rows("codex", "write-file")
    path = write_trajectory(trajectory_from_events(rows, trial=trial_row("codex", usage), usage_rows=usage),
                            tmp_path / "t.json")
    code, err = run("import", "atif", str(path), "--suite", "mine", "--db", str(db))
    assert code == 0 and "suite mine" in err, err
    home = tmp_path / "home" / ".claude" / "projects" / "-proj"
    home.mkdir(parents=True)
    (home / "aaaa.jsonl").write_bytes((STREAMS / "claude-code" / "write-file.session.jsonl").read_bytes())
    code, err = run("import", "sessions", "--cli", "claude-code", str(home.parent), "--suite", "s1",
                    "--db", str(db))
    assert code == 0 and "suite s1" in err, err
    records = tmp_path / "r.jsonl"
    assert run("export-trials", "--db", str(db), "--suite", "s1", "--out", str(records))[0] == 0
    code, err = run("import-trials", str(records), "--db", str(tmp_path / "other.db"))
    assert code == 0 and "suite s1" in err, err
