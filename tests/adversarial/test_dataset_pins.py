"""Attacks on datasets by name (issue 34): a registry whose task path climbs out of its
repository, a task folder holding a link out of itself, and a cached task changed under its
commit with the cache's own record rewritten to match (the store that ran the commit still
knows the folder's hash). Each is refused with one line naming the task (and commit), exit 2."""

from __future__ import annotations

import json
import os

from agentmeter_tui.core.datasets.fetch import folder_hash
from tests.conftest import agentmeter
from tests.core.test_datasets import counted_git, git, make_repo, registry, run_dataset  # noqa: F401 - a fixture


def test_a_task_path_out_of_its_repository_is_refused(tmp_path):
    reg = tmp_path / "registry.json"
    reg.write_text(json.dumps([{"name": "d", "version": "1", "description": "", "tasks": [
        {"name": "t", "git_url": "file:///x", "git_commit_id": "abcdef1", "path": "tasks/../../.."}]}]))
    done = agentmeter("run", "d@1", "--registry", str(reg), "-m", "scripted/x", "-a", "reference",
                      "--db", str(tmp_path / "x.db"), env={"AGENTMETER_DATASETS_DIR": str(tmp_path / "cache")})
    assert done.returncode == 2 and "leaves the repository" in done.stderr, done.stderr
    assert "[0].tasks[0].path" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "cache" / "repos").exists()  # refused before any git ran


def test_a_task_folder_with_a_link_out_of_itself_is_refused(tmp_path, counted_git):
    env, _ = counted_git
    repo, _ = make_repo(tmp_path)
    os.symlink("/etc/passwd", repo / "tasks" / "count-lines" / "peek")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "a link out", cwd=repo)
    reg = registry(tmp_path, repo, git("rev-parse", "HEAD", cwd=repo))
    done = run_dataset(reg, tmp_path / "x.db", env)
    assert done.returncode == 2 and "task 'count-lines'" in done.stderr and "refused" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "cache" / "tasks" / "smokebench@1.0" / "count-lines").exists()


def test_a_task_changed_with_its_cache_record_rewritten_is_refused_by_the_store(tmp_path, counted_git):
    env, _ = counted_git
    repo, pinned = make_repo(tmp_path)
    reg = registry(tmp_path, repo, pinned)
    db = tmp_path / "ds.db"
    first = run_dataset(reg, db, env)
    assert first.returncode == 0, first.stderr + first.stdout
    cached = tmp_path / "cache" / "tasks" / "smokebench@1.0" / "count-lines"
    (cached / "instruction.md").write_text("count the words instead\n")
    mark = tmp_path / "cache" / "marks" / "smokebench@1.0" / "count-lines.json"
    record = json.loads(mark.read_text())
    mark.write_text(json.dumps({**record, "tree_hash": folder_hash(cached)}))  # the cache now agrees
    again = run_dataset(reg, db, env)
    assert again.returncode == 2, again.stderr + again.stdout
    line = again.stderr.strip()
    assert len(line.splitlines()) == 1 and "count-lines" in line and pinned in line, line
    assert "this store ran it as" in line, line
