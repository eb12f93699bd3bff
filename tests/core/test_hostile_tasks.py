"""Hostile task and suite files (issue 16, part 4): a task folder whose files link out of it
(``/etc/shadow``, ``~/.ssh``, ``../..``), a suite naming a host file, huge files, and archives
whose members would escape their folder. Each is refused with an error naming the file, before
anything is run or stored, or (archives) unpacked with nothing written outside."""

from __future__ import annotations

import io
import os
import shutil
import tarfile

import pytest

from agentmeter_tui.core.sandboxes.archive import extract
from agentmeter_tui.core.suites.load import load_suite
from agentmeter_tui.core.suites.taskfiles import MAX_FILE_BYTES, MAX_TESTS_BYTES
from agentmeter_tui.core.tomlerrors import InputError
from tests.conftest import ROOT, agentmeter

SMOKE = ROOT / "suites" / "smoke"


@pytest.fixture
def suite(tmp_path):
    copy = tmp_path / "suite"
    shutil.copytree(SMOKE, copy)
    return copy


def refused(suite, db) -> str:
    """``agentmeter run`` refuses the suite: exit 2, no store written; its message."""
    result = agentmeter("run", str(suite), "--headless", "--db", str(db))
    assert result.returncode == 2, result.stdout + result.stderr
    assert not db.exists(), "a store was created for a refused suite"
    return result.stderr


@pytest.mark.parametrize("where, target", [
    ("count-lines/workspace/shadow", "/etc/shadow"),
    ("count-lines/tests/id_rsa", os.path.expanduser("~/.ssh/id_rsa")),
    ("count-lines/workspace/up", "../../../.."),
    ("count-lines/instruction.md", "/etc/hostname"),
])
def test_a_link_out_of_the_task_folder_is_refused(suite, tmp_path, where, target):
    link = suite / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    message = refused(suite, tmp_path / "a.db")
    assert str(link) in message and f"a symlink to '{target}', outside the task folder" in message


def test_a_link_inside_the_task_folder_is_fine(suite):
    workspace = suite / "count-lines" / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "data.txt").write_text("x\n")
    (workspace / "alias.txt").symlink_to("data.txt")
    assert load_suite(suite).task("count-lines")


def test_a_huge_file_is_refused(suite, tmp_path):
    huge = suite / "count-lines" / "workspace" / "huge.bin"
    huge.parent.mkdir(exist_ok=True)
    with open(huge, "wb") as handle:  # sparse: no disk used
        handle.truncate(MAX_FILE_BYTES + 1)
    message = refused(suite, tmp_path / "a.db")
    assert str(huge) in message and "files over 1 GiB are refused" in message


def test_too_many_test_bytes_are_refused(suite, tmp_path):
    big = suite / "count-lines" / "tests" / "fixture.bin"
    with open(big, "wb") as handle:
        handle.truncate(MAX_TESTS_BYTES + 1)
    message = refused(suite, tmp_path / "a.db")
    assert "count-lines/tests" in message and "MiB of tests" in message


def test_a_suite_naming_a_host_file_is_refused(suite, tmp_path):
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text().replace('pricing = "prices.toml"', 'pricing = "/etc/passwd"'))
    assert 'pricing = "/etc/passwd"' in toml.read_text()
    message = refused(suite, tmp_path / "a.db")
    assert "suite.pricing" in message and "outside the suite folder" in message and "root:" not in message
    with pytest.raises(InputError, match="outside the suite folder"):
        load_suite(suite)


def test_archive_members_never_land_outside(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        def add(name, data=b"x", kind=tarfile.REGTYPE, link=""):
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.size = kind, link, len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
        add("ok/kept.txt")
        add("../escaped.txt")
        add("/tmp/absolute.txt")
        add("ok/out", kind=tarfile.SYMTYPE, link="/etc")
        add("ok/up", kind=tarfile.SYMTYPE, link="../..")
        add("ok/hard", kind=tarfile.LNKTYPE, link="/etc/passwd")
    dest = tmp_path / "deep" / "dest"
    extract(buffer.getvalue(), dest)
    assert (dest / "ok" / "kept.txt").read_bytes() == b"x"
    assert not (tmp_path / "deep" / "escaped.txt").exists() and not (dest.parent / "escaped.txt").exists()
    for path in dest.rglob("*"):  # nothing unpacked points or lies outside
        assert path.resolve().is_relative_to(dest.resolve()), path
