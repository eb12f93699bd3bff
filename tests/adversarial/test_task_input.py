"""Task folders and suite files crafted to hurt: what a workspace may not hold (issue 23 item
5) and the inputs that crashed loading (issue 24 item 8). Each is refused at load with one
line naming the file (and the field), a non-zero exit and no store, or, in a ``tasks_dir``
dataset, skips its one task while the others load."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from agentmeter_tui.core.suites.load import load_suite
from tests.core.test_hostile_tasks import SMOKE, suite  # noqa: F401 - suite is a fixture
from tests.core.test_hostile_tasks import refused as refused_run


@pytest.fixture
def dataset(tmp_path):
    """The smoke suite with its two tasks read in place from ``tasks/`` (``tasks_dir``)."""
    copy = tmp_path / "suite"
    shutil.copytree(SMOKE, copy)
    (tmp_path / "tasks").mkdir()
    for name in ("count-lines", "write-greeting"):
        shutil.move(copy / name, tmp_path / "tasks" / name)
    toml = copy / "suite.toml"
    toml.write_text(toml.read_text().replace("[suite]\n", '[suite]\ntasks_dir = "../tasks"\n', 1))
    return copy


def refused(suite: Path, db: Path, *names: str) -> str:
    """``agentmeter run`` refuses (exit 2, no store) in one line naming each of ``names``."""
    stderr = refused_run(suite, db)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # the socket file stays


def _hard_link(path: Path) -> None:
    outside = path.parents[3] / "host-file"
    outside.write_text("a file of this machine\n")
    os.link(outside, path)


SPECIALS = {"a named pipe": _fifo, "a socket": _socket, "a hard link with 1 name(s) outside": _hard_link}


@pytest.mark.parametrize("what", list(SPECIALS))
def test_a_special_file_in_a_workspace_is_refused_at_load(suite, tmp_path, what):
    """A FIFO or socket loaded and then failed every trial three times with a traceback; a hard
    link to a file outside the task folder copied that file into every trial."""
    path = suite / "count-lines" / "workspace" / "odd"
    SPECIALS[what](path)
    refused(suite, tmp_path / "a.db", str(path), what)


@pytest.mark.parametrize("what", list(SPECIALS))
def test_a_dataset_skips_only_the_task_with_a_special_file(dataset, tmp_path, what):
    path = tmp_path / "tasks" / "count-lines" / "workspace" / "odd"
    SPECIALS[what](path)
    loaded = load_suite(dataset)
    assert [t.id for t in loaded.tasks] == ["write-greeting"]
    assert str(path) in str(loaded.skipped[0]) and what in str(loaded.skipped[0])


def test_a_symlink_loop_skips_its_task_not_the_dataset(dataset, tmp_path):
    """Today: RuntimeError, and the whole tasks_dir suite does not load."""
    workspace = tmp_path / "tasks" / "count-lines" / "workspace"
    (workspace / "a").symlink_to("b")
    (workspace / "b").symlink_to("a")
    loaded = load_suite(dataset)
    assert [t.id for t in loaded.tasks] == ["write-greeting"]
    assert "a symlink loop" in str(loaded.skipped[0]) and str(workspace / "a") in str(loaded.skipped[0])


def _deep(top: Path, depth: int) -> Path:
    path = top
    for _ in range(depth):
        path = path / "d"
        path.mkdir()
    return path


def _remove_deep(top: Path) -> None:
    """rmtree recurses once per level: remove a deep tree from its bottom instead."""
    while (top / "d").exists():
        path = top / "d"
        while (path / "d").exists():
            path = path / "d"
        path.rmdir()


def test_a_workspace_1200_folders_deep_is_refused(suite, tmp_path):
    """Today: RecursionError."""
    top = suite / "count-lines" / "workspace"
    _deep(top, 1200)
    try:
        refused(suite, tmp_path / "a.db", "folders nested more than")
    finally:
        _remove_deep(top)


@pytest.mark.parametrize("file", ["suite.toml", "count-lines/task.toml"])
def test_toml_nested_5000_deep_is_refused(suite, tmp_path, file):
    """Today: RecursionError."""
    path = suite / file
    path.write_text(path.read_text() + "\n[deep]\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    refused(suite, tmp_path / "a.db", str(path), "nested too deep")


def test_a_suite_toml_that_is_a_folder_is_refused(suite, tmp_path):
    """Today: IsADirectoryError."""
    (suite / "suite.toml").unlink()
    (suite / "suite.toml").mkdir()
    refused(suite, tmp_path / "a.db", str(suite / "suite.toml"), "a folder, not a file")


@pytest.mark.parametrize("table, field", [
    ('[[clis]]\nadapter = "reference"\nenv = { X = "a\\u0000b" }\n', "clis[0].env"),
    ('[[clis]]\nadapter = "reference"\nenv = { "A=B" = "x" }\n', "clis[0].env"),
    ('[[clis]]\nadapter = "reference"\nargs = ["a\\u0000b"]\n', "clis[0].args"),
])
def test_what_exec_cannot_take_is_refused_in_cli_entries(suite, tmp_path, table, field):
    path = suite / "suite.toml"
    path.write_text(path.read_text().replace('[[clis]]\nadapter = "reference"\n', table))
    refused(suite, tmp_path / "a.db", str(path), f"field '{field}'")


@pytest.mark.parametrize("value", ["inf", "nan", "-1.0"])
def test_kill_grace_must_be_a_finite_positive_number(suite, tmp_path, value):
    path = suite / "suite.toml"
    path.write_text(path.read_text().replace("[suite]\n", f"[suite]\nkill_grace = {value}\n", 1))
    refused(suite, tmp_path / "a.db", str(path), "field 'suite.kill_grace'")
