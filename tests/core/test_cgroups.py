"""The cgroup per trial (core/cgroups.py): a kill takes the whole group, setsid'd and forking
members included, in v2 and v1; groups of an owner that is gone are found and removed by
``clean_leftovers``; without a usable hierarchy nothing is made and the note says so."""

from __future__ import annotations

import subprocess
import threading

import pytest

from agentmeter_tui.core import cgroups
from tests.conftest import need
from tests.waiting import pid_running, wait_for

# a shell that leaves a setsid'd, TERM-ignoring child forking a grandchild every moment
FORKER = "setsid sh -c 'trap \"\" TERM INT HUP; while :; do sleep 1 & wait; done' & echo ready; wait"


@pytest.fixture(name="forced", params=["cgroup2", "cgroup1"])
def forced_hierarchy(request, monkeypatch):  # test_joining's too
    monkeypatch.setenv(cgroups.FORCE_VAR, request.param)
    cgroups.hierarchy.cache_clear()
    found = cgroups.hierarchy()
    need(found is not None and found.version == int(request.param[-1]), f"no writable {request.param} here")
    yield found
    cgroups.hierarchy.cache_clear()


def start_in(group: cgroups.Group) -> subprocess.Popen:
    proc = subprocess.Popen([*group.join_prefix(), "sh", "-c", FORKER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    wait_for(lambda: len(group.pids()) >= 3, "the forker's members")
    return proc


def test_a_group_is_killed_whole_and_removed(forced):
    group = cgroups.new_group(f"test-{forced.version}")
    proc = start_in(group)
    members = group.pids()
    assert group.remove()
    proc.wait()
    assert not group.path.exists() and not any(pid_running(pid) for pid in members)
    cgroups.remove_owner_folder()


def test_groups_of_a_gone_owner_are_found_and_removed(forced):
    # The owner runs while its group fills: other tests' runners clean leftovers as they open
    # local sandboxes, and an owner gone from the start lost its group to one of them (CI).
    runner = subprocess.Popen(["sleep", "600"])
    owner = forced.parent / cgroups.owner_key(runner.pid)
    group = cgroups.Group(forced, owner / "abandoned")
    group.path.mkdir(parents=True)
    live = cgroups.new_group("still-ours")  # this process's own group is left alone
    proc = start_in(group)
    members = group.pids()
    runner.kill()
    runner.wait()  # reaped: its owner is gone
    try:
        removed, killed = cgroups.clean_leftovers()
        proc.wait()
        assert removed >= 1 and killed >= 3
        assert not owner.exists() and live.path.exists()
        assert not any(pid_running(pid) for pid in members)
    finally:
        group.remove()
        live.remove()
        cgroups.remove_owner_folder()


def test_without_a_hierarchy_nothing_is_made(monkeypatch):
    monkeypatch.setenv(cgroups.FORCE_VAR, "none")
    cgroups.hierarchy.cache_clear()
    try:
        assert cgroups.new_group("x") is None
        assert "no writable cgroup" in cgroups.describe()
    finally:
        cgroups.hierarchy.cache_clear()


def test_trials_asking_at_once_all_get_the_hierarchy_one_alone_gets(monkeypatch):
    """Local trials open their sandboxes on worker threads, so the first ones ask for the
    hierarchy together; their probes once shared a folder and removed it under each other, and
    some trials fell back to v1's freezer (or to no group at all)."""
    monkeypatch.delenv(cgroups.FORCE_VAR, raising=False)
    cgroups.hierarchy.cache_clear()
    alone = cgroups.hierarchy()
    need(alone is not None, "no writable cgroup here")
    try:
        for _ in range(5):
            cgroups.hierarchy.cache_clear()
            start = threading.Barrier(8)
            found: list[cgroups.Hierarchy | None] = []

            def ask(start: threading.Barrier = start, found: list = found) -> None:  # this round's
                start.wait()
                found.append(cgroups.hierarchy())

            threads = [threading.Thread(target=ask) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert found == [alone] * 8
    finally:
        cgroups.hierarchy.cache_clear()
