"""Datasets by name (issue 34): `agentmeter run NAME@VERSION` with a registry in Harbor's format
(a JSON list of datasets: name, version, description, tasks of name, git_url, git_commit_id,
path) naming git repositories this test makes (file:// URLs, nothing leaves the machine). The
pinned folders are fetched once (a second run runs no git fetch, clone or archive), each task's
dataset, version and commit are recorded in the store, and a task whose folder changed under the
same commit is refused, naming task and commit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentmeter_tui.core.harbor.dataset_registry import RegistryError, read_registry
from agentmeter_tui.core.store import Store
from tests.conftest import ROOT, agentmeter

SMOKE = ROOT / "suites" / "smoke"
TASKS = ("count-lines", "write-greeting")


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def make_repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository with the smoke suite's two tasks under tasks/, committed; a later commit
    changes one (the registry pins the first, so the change must not be run)."""
    repo = tmp_path / "bench-repo"
    (repo / "tasks").mkdir(parents=True)
    for task in TASKS:
        shutil.copytree(SMOKE / task, repo / "tasks" / task)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "tasks", cwd=repo)
    pinned = git("rev-parse", "HEAD", cwd=repo)
    (repo / "tasks" / "count-lines" / "instruction.md").write_text("a later instruction\n")
    git("commit", "-qam", "later", cwd=repo)
    return repo, pinned


def registry(tmp_path: Path, repo: Path, commit: str) -> Path:
    path = tmp_path / "registry.json"
    path.write_text(json.dumps([{"name": "other", "version": "1", "description": "", "tasks": []},
                                {"name": "smokebench", "version": "1.0", "description": "the smoke tasks",
                                 "tasks": [{"name": task, "git_url": repo.as_uri(), "git_commit_id": commit,
                                            "path": f"tasks/{task}"} for task in TASKS]}]))
    return path


@pytest.fixture
def counted_git(tmp_path: Path) -> tuple[dict, Path]:
    """PATH with a `git` that logs each invocation's arguments, then runs the real one."""
    bin_dir, log = tmp_path / "bin", tmp_path / "git.log"
    bin_dir.mkdir()
    real = shutil.which("git")
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "AGENTMETER_DATASETS_DIR": str(tmp_path / "cache")}, log


def fetches(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.split(" ")[0] in ("clone", "fetch", "archive")
            or " archive " in line or " fetch " in line]


def run_dataset(reg: Path, db: Path, env: dict) -> subprocess.CompletedProcess:
    return agentmeter("run", "smokebench@1.0", "--registry", str(reg), "-m", "scripted/solver", "-a", "reference",
                      "--scenarios", str(SMOKE / "scenarios"), "--headless", "--db", str(db), env=env)


def test_a_dataset_is_fetched_once_pinned_and_a_changed_task_refused(tmp_path, counted_git):
    env, log = counted_git
    repo, pinned = make_repo(tmp_path)
    reg = registry(tmp_path, repo, pinned)
    db = tmp_path / "ds.db"

    first = run_dataset(reg, db, env)
    assert first.returncode == 0, first.stderr + first.stdout
    assert "2 fetched now" in first.stderr, first.stderr
    assert any(line.startswith("clone --bare") for line in fetches(log)), log.read_text()
    store = Store(db, readonly=True)
    try:
        suite_id = store.sources.suite_file()["suite_id"]
        sources = store.sources.task_sources(suite_id)
        trials = store.trials(suite_id)
    finally:
        store.close()
    assert [(s["task_id"], s["dataset"], s["version"], s["commit_id"], s["git_url"]) for s in sources] == \
        [(task, "smokebench", "1.0", pinned, repo.as_uri()) for task in TASKS]
    assert sorted((t["task_id"], t["status"]) for t in trials) == [(task, "passed") for task in TASKS]
    # The pinned commit's folder ran, not the later one (its instruction is the smoke suite's).
    cached = tmp_path / "cache" / "tasks" / "smokebench@1.0" / "count-lines"
    assert (cached / "instruction.md").read_text() == (SMOKE / "count-lines" / "instruction.md").read_text()

    # A second run (another store, same cache): nothing fetched, not one git clone/fetch/archive.
    before = len(fetches(log))
    again = run_dataset(reg, tmp_path / "again.db", env)
    assert again.returncode == 0, again.stderr + again.stdout
    assert "0 fetched now, 2 from the cache" in again.stderr, again.stderr
    assert len(fetches(log)) == before, log.read_text()

    # The cached folder changed under the same commit: refused, one line naming task and commit.
    (cached / "instruction.md").write_text("count the words instead\n")
    refused = run_dataset(reg, tmp_path / "third.db", env)
    assert refused.returncode == 2, refused.stderr + refused.stdout
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert "count-lines" in line and pinned in line and "changed under commit" in line, line


@pytest.mark.parametrize(("row", "field"), [
    ({"name": "d", "version": "1", "description": "", "tasks": [{"name": "t", "git_url": "u", "path": "p"}]},
     "[0].tasks[0].git_commit_id"),
    ({"name": "d", "description": "", "tasks": []}, "[0].version"),
    ({"name": "d", "version": "1", "description": "", "tasks": [
        {"name": "t", "git_url": "u", "git_commit_id": "abcdef1", "path": "../../etc"}]}, "[0].tasks[0].path"),
])
def test_a_bad_registry_is_one_line_naming_file_and_field(tmp_path, row, field):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps([row]))
    with pytest.raises(RegistryError) as caught:
        read_registry(str(path))
    assert str(path) in str(caught.value) and f"'{field}'" in str(caught.value), caught.value
    done = agentmeter("run", "d@1", "--registry", str(path), "-m", "scripted/x", "-a", "reference",
                      "--db", str(tmp_path / "x.db"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"'{field}'" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_an_unknown_dataset_names_what_the_registry_has(tmp_path):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps([{"name": "d", "version": "1", "description": "", "tasks": [
        {"name": "t", "git_url": "file:///nowhere", "git_commit_id": "abcdef1", "path": "t"}]}]))
    done = agentmeter("run", "d@2", "--registry", str(path), "-m", "scripted/x", "-a", "reference",
                      "--db", str(tmp_path / "x.db"))
    assert done.returncode == 2 and "no dataset d@2; it has: d@1" in done.stderr, done.stderr
