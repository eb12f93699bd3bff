"""Fetching a dataset's pinned task folders into a cache, once.

One bare clone per repository (``repos/HASH.git``); each task is its commit's folder written out
with ``git archive COMMIT:PATH`` into ``tasks/NAME@VERSION/TASK``, and the hash of what was
written kept beside it (``marks/``). A second run finds the folders and runs no git at all; a
folder whose files no longer hash as fetched under the same commit is refused (naming task and
commit), never run: results under a commit must be results of that commit's task.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..harbor.dataset_registry import Dataset, RegistryTask

CACHE_ENV = "AGENTMETER_DATASETS_DIR"


class FetchError(RuntimeError):
    """A task that cannot be fetched, or that changed under its commit (the message says which)."""


@dataclass
class TaskSource:
    """Where one task of a dataset run came from, as the store records it."""

    task_id: str
    dataset: str
    version: str
    git_url: str
    commit_id: str
    path: str
    tree_hash: str


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentmeter" / "datasets"


def folder_hash(folder: Path) -> str:
    """sha256 over every file's relative path, mode (executable or not) and bytes, in order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()):
        relative = path.relative_to(folder).as_posix()
        executable = os.access(path, os.X_OK) and not path.is_symlink()
        content = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        digest.update(f"{relative}\0{int(executable)}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def fetch_dataset(dataset: Dataset, root: Path | None = None) -> tuple[Path, list[TaskSource], int]:
    """The folder of the dataset's task folders, each task's source, and how many were fetched now."""
    import fcntl

    root = root or cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a") as lock:  # two runs fetching into one cache at once take turns
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _fetch_all(dataset, root)


def _fetch_all(dataset: Dataset, root: Path) -> tuple[Path, list[TaskSource], int]:
    tasks_dir = root / "tasks" / dataset.ref
    marks = root / "marks" / dataset.ref
    tasks_dir.mkdir(parents=True, exist_ok=True)
    marks.mkdir(parents=True, exist_ok=True)
    sources, fetched = [], 0
    for task in dataset.tasks:
        folder, mark = tasks_dir / task.name, marks / f"{task.name}.json"
        source = _cached(dataset, task, folder, mark)
        if source is None:
            source = _fetch(dataset, task, root, folder, mark)
            fetched += 1
        sources.append(source)
    return tasks_dir, sources, fetched


def _cached(dataset: Dataset, task: RegistryTask, folder: Path, mark: Path) -> TaskSource | None:
    """The task's source if its folder is in the cache as fetched; None to fetch it."""
    if not folder.is_dir() or not mark.is_file():
        return None
    recorded = TaskSource(**json.loads(mark.read_text()))
    if (recorded.git_url, recorded.commit_id, recorded.path) != (task.git_url, task.git_commit_id, task.folder()):
        return None  # the registry moved the task: fetch what it names now
    now = folder_hash(folder)
    if now != recorded.tree_hash:
        raise FetchError(f"dataset {dataset.ref}: task '{task.name}' changed under commit {task.git_commit_id} "
                         f"(its folder {folder} hashes {now[:12]}, fetched as {recorded.tree_hash[:12]}); "
                         "refused: delete the folder to fetch it again")
    return recorded


def _fetch(dataset: Dataset, task: RegistryTask, root: Path, folder: Path, mark: Path) -> TaskSource:
    bare = _bare_clone(task.git_url, task.git_commit_id, root)
    tree = f"{task.git_commit_id}:{task.folder()}" if task.folder() != "." else task.git_commit_id
    archive = _git(["-C", str(bare), "archive", "--format=tar", tree], f"task '{task.name}' at {tree}")
    partial = folder.with_name(folder.name + ".part")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    try:  # "data": no file or link may point out of the folder, no device, no setuid bit
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(partial, filter="data")
    except tarfile.TarError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise FetchError(f"dataset {dataset.ref}: task '{task.name}' at {task.git_commit_id} refused: {exc}") from None
    if not (partial / "task.toml").is_file():
        shutil.rmtree(partial, ignore_errors=True)
        raise FetchError(f"dataset {dataset.ref}: task '{task.name}': {task.git_url} at {task.git_commit_id} has no "
                         f"task.toml under '{task.path}'")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    source = TaskSource(task.name, dataset.name, dataset.version, task.git_url, task.git_commit_id,
                        task.folder(), folder_hash(folder))
    mark.with_suffix(".part").write_text(json.dumps(asdict(source)))
    mark.with_suffix(".part").replace(mark)
    return source


def _bare_clone(url: str, commit: str, root: Path) -> Path:
    """The repository's bare clone, holding ``commit`` (cloned, or fetched into, only when it does not)."""
    bare = root / "repos" / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".git")
    if not bare.is_dir():
        bare.parent.mkdir(parents=True, exist_ok=True)
        partial = bare.with_name(bare.name + ".part")
        shutil.rmtree(partial, ignore_errors=True)
        _git(["clone", "--bare", "--quiet", "--", url, str(partial)], f"clone of {url}")
        partial.rename(bare)
    if not _has(bare, commit):
        _git(["-C", str(bare), "fetch", "--quiet", "origin", "+refs/*:refs/*"], f"fetch from {url}")
        if not _has(bare, commit):
            raise FetchError(f"{url}: no commit {commit}")
    return bare


def _has(bare: Path, commit: str) -> bool:
    done = subprocess.run(["git", "-C", str(bare), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True)
    return done.returncode == 0


def _git(args: list[str], what: str) -> bytes:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # never a password prompt in a headless run
    try:
        done = subprocess.run(["git", *args], capture_output=True, env=env, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FetchError(f"{what}: git failed ({exc})") from None
    if done.returncode:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["(no output)"])[-1]
        raise FetchError(f"{what}: {last}")
    return done.stdout
