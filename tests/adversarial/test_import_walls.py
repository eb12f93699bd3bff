"""Imported folders crafted to read outside themselves (issue 23, item 4).

A Harbor job folder, an ATIF file or a CLI's session folder is untrusted: its links may point
anywhere on the machine, its "files" may be named pipes, its step names may climb out. Every
read must stay under the folder given, refuse links that leave it and special files, never
block, and name what it refused. The good parts are real recordings (tests/fixtures); the
planted secret is a file beside the folder, standing for /etc/shadow."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

from agentmeter_tui.core.store import Store
from tests.interop.support import HARBOR_JOBS, STREAMS
from tests.interop.support import cli as run
from tests.waiting import wait_for

SECRET = "HOST-SECRET-4c1e"


def _secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "shadow"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"root:{SECRET}:19000:0:99999:7:::\n")
    return path


def _stored_text(db: Path) -> str:
    """Everything the store kept of its trials: rows and every event's text."""
    store = Store(db)
    parts = []
    for trial in store.trials():
        parts.append(json.dumps(trial, default=str))
        parts.extend(row[4] or "" for row in store.events(trial["id"]))
    return "\n".join(parts)


def test_harbor_links_to_a_host_file_are_refused_and_named(tmp_path, db):
    secret = _secret(tmp_path)
    job = tmp_path / "job"
    shutil.copytree(HARBOR_JOBS / "terminus-solve", job)
    trial = next(p for p in job.iterdir() if (p / "result.json").exists())
    (trial / "verifier" / "test-stdout.txt").unlink()
    (trial / "verifier" / "test-stdout.txt").symlink_to(secret)
    (trial / "agent" / "trajectory.json").unlink()
    (trial / "agent" / "terminus-2.txt").symlink_to(secret)
    code, err = run("import", "harbor", str(job), "--db", str(db))
    assert SECRET not in _stored_text(db)
    assert len(Store(db).trials()) == 1  # the trial itself is imported, without the refused files
    assert f"{trial / 'verifier' / 'test-stdout.txt'}: refused" in err
    assert f"{trial / 'agent' / 'terminus-2.txt'}: refused" in err
    assert code == 1


def test_harbor_step_name_cannot_climb_out_of_the_trial(tmp_path, db):
    _secret(tmp_path)
    outside = tmp_path / "outside"
    (outside / "agent").mkdir()
    (outside / "agent" / "oracle.txt").write_text(SECRET)
    (outside / "verifier").mkdir()
    (outside / "verifier" / "test-stdout.txt").write_text(SECRET)
    job = tmp_path / "job"
    shutil.copytree(HARBOR_JOBS / "oracle-steps", job)
    trial = next(p for p in job.iterdir() if (p / "result.json").exists())
    result = json.loads((trial / "result.json").read_text())
    # TRIAL/steps/NAME/agent with NAME = ../../../outside is tmp_path/outside/agent
    result["step_results"][0]["step_name"] = "../../../outside"
    (trial / "result.json").write_text(json.dumps(result))
    (trial / "steps" / "evil").symlink_to(outside, target_is_directory=True)  # a link to a folder outside
    code, err = run("import", "harbor", str(job), "--db", str(db))
    assert SECRET not in _stored_text(db)
    assert "../../../outside" in err and "refused" in err
    assert f"{trial / 'steps' / 'evil'}" in err
    assert code == 1


def _release(fifo: Path) -> None:
    """Open the pipe's other end so a reader blocked on it (the old code) lets go."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


def _import_in_thread(args: list[str], fifos: list[Path]) -> tuple[int, str]:
    outcome: dict[str, tuple[int, str]] = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("done", run(*args)), daemon=True)
    thread.start()
    try:
        wait_for(lambda: "done" in outcome, "the import to finish (it blocked on a named pipe)")
    finally:
        while thread.is_alive():  # the old code blocks on each pipe in turn: let every one go
            for fifo in fifos:
                _release(fifo)
            thread.join(0.05)
    return outcome["done"]


def test_harbor_named_pipe_is_refused_and_never_blocks(tmp_path, db):
    job = tmp_path / "job"
    shutil.copytree(HARBOR_JOBS / "oracle-mixed", job)
    trials = sorted(p for p in job.iterdir() if (p / "result.json").exists())
    fifo = trials[0] / "result.json"
    fifo.unlink()
    os.mkfifo(fifo)
    stdout = trials[1] / "verifier" / "test-stdout.txt"
    stdout.unlink()
    os.mkfifo(stdout)
    code, err = _import_in_thread(["import", "harbor", str(job), "--db", str(db)], [fifo, stdout])
    assert f"{fifo}: refused" in err and "not a regular file" in err
    assert f"{stdout}: refused" in err
    assert len(Store(db).trials()) == len(trials) - 1
    assert code == 1


def test_atif_named_pipe_and_link_out_are_refused(tmp_path, db):
    secret = _secret(tmp_path)
    folder = tmp_path / "files"
    folder.mkdir()
    fifo = folder / "pipe.json"
    os.mkfifo(fifo)
    link = folder / "link.json"
    link.symlink_to(secret)
    code, err = _import_in_thread(["import", "atif", str(fifo), str(link), "--db", str(db)], [fifo])
    assert f"{fifo}: refused" in err and f"{link}: refused" in err
    assert SECRET not in err
    assert code == 1


SESSION = STREAMS / "claude-code" / "write-file.session.jsonl"


def test_session_folder_links_and_pipes_are_refused(tmp_path, db):
    secret = _secret(tmp_path)
    outside = tmp_path / "outside" / "-elsewhere"
    outside.mkdir()
    (outside / "dddd.jsonl").write_bytes(SESSION.read_bytes().replace(b"Write", SECRET.encode()))
    store = tmp_path / "home" / ".claude" / "projects"
    project = store / "-proj"
    project.mkdir(parents=True)
    (project / "aaaa.jsonl").write_bytes(SESSION.read_bytes())
    (project / "bbbb.jsonl").symlink_to(secret)
    fifo = project / "cccc.jsonl"
    os.mkfifo(fifo)
    (store / "-linked").symlink_to(outside, target_is_directory=True)
    code, err = _import_in_thread(["import", "sessions", "--cli", "claude-code", str(store), "--db", str(db)],
                                  [fifo])
    assert SECRET not in _stored_text(db)
    assert [json.loads(r["extra"])["session"]["id"] for r in Store(db).trials()] == ["aaaa"]
    assert f"{project / 'bbbb.jsonl'}: refused" in err and f"{fifo}: refused" in err
    assert code == 1


def test_a_huge_imported_file_is_refused_without_reading_it(tmp_path, db, monkeypatch):
    from agentmeter_tui.core.interop import walls

    monkeypatch.setattr(walls, "FILE_LIMIT", 64 * 1024)  # the real check, at a size the test can write
    job = tmp_path / "job"
    shutil.copytree(HARBOR_JOBS / "oracle-mixed", job)
    trials = sorted(p for p in job.iterdir() if (p / "result.json").exists())
    big = trials[0] / "verifier" / "test-stdout.txt"
    big.write_bytes(b"x" * (128 * 1024))
    code, err = run("import", "harbor", str(job), "--db", str(db))
    assert f"{big}: refused" in err and "larger than" in err
    assert len(Store(db).trials()) == len(trials)
    assert code == 1


def test_session_file_hard_linked_to_a_file_outside_is_refused(tmp_path, db):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "other-user.jsonl"  # a session of someone else's, on the same disk
    secret.write_bytes(SESSION.read_bytes().replace(b"Write", SECRET.encode()))
    project = tmp_path / "home" / ".claude" / "projects" / "-proj"
    project.mkdir(parents=True)
    (project / "aaaa.jsonl").write_bytes(SESSION.read_bytes())
    os.link(secret, project / "bbbb.jsonl")
    code, err = run("import", "sessions", "--cli", "claude-code", str(project.parent), "--db", str(db))
    assert SECRET not in _stored_text(db)
    assert f"{project / 'bbbb.jsonl'}: refused" in err and "hard link" in err
    assert code == 1


def test_opencode_store_that_is_a_named_pipe_never_blocks(tmp_path, db):
    store = tmp_path / "home" / ".local" / "share" / "opencode"
    store.mkdir(parents=True)
    fifo = store / "opencode.db"
    os.mkfifo(fifo)
    code, err = _import_in_thread(["import", "sessions", "--cli", "opencode", str(store), "--db", str(db)],
                                  [fifo])
    assert f"{fifo}: refused" in err
    assert code == 1


def test_import_trials_from_a_named_pipe_never_blocks(tmp_path, db):
    fifo = tmp_path / "records.jsonl"
    os.mkfifo(fifo)
    code, err = _import_in_thread(["import-trials", str(fifo), "--db", str(db)], [fifo])
    assert f"{fifo}: refused" in err
    assert code == 2
