"""A finished trial's folder is reused for the next trial (sandboxes/rootpool.py: making and
removing five folders per trial was the largest share of a trivial trial's cost on ext4
without a journal). What one agent leaves there must never reach the next trial, nor lead the
runner outside the folder: files, links, a FIFO, a folder swapped for a link out, modes with
setgid and sticky bits, extended attributes, a daemon. These guard the reuse itself: the old
code removed every root, so they pass there too; a reuse without the checks fails them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentmeter_tui.core import cgroups, procs
from agentmeter_tui.core.sandboxes import SANDBOXES
from agentmeter_tui.core.sandboxes.rootpool import FOLDERS, RootPool
from tests.adversarial.walls_support import SECRET, _suite, agent_does, host_files
from tests.conftest import need
from tests.waiting import eventually

LEFT = (
    "echo left > ../workspace/note.txt && mkdir -p ../home/.config/deep && echo x > ../home/.config/deep/f"
    " && ln -s / ../home/up && mkfifo ../tmp/pipe && ln -s {outside} ../tmp/out && chmod 3777 ../workspace"
    " && python3 -c \"import os; os.setxattr('../home', 'user.left', b'1')\""
    " && (setsid sh -c 'sleep 600' > /dev/null 2>&1 &)"
)
# Beside its folders: only an agent without bwrap's walls can (its folders are mount points
# in an otherwise read-only view under them).
BESIDE = " && echo planted > ../root-file && cd .. && rm -rf scratch && ln -s {outside} scratch"


def _entries(root: Path) -> dict[str, list[str]]:
    return {name: sorted(os.listdir(root / name)) if (root / name).is_dir() else [] for name in sorted(os.listdir(root))}


@pytest.mark.parametrize("kind", ["local", "local-unwalled"])
async def test_a_reused_root_carries_nothing_of_the_trial_before(tmp_path, kind):
    need(cgroups.hierarchy() is not None, "a cgroup of our own is needed (root, or a delegated one)")
    outside, secret = host_files(tmp_path)
    (outside / "keep.txt").write_text("host file")
    suite = _suite(tmp_path, kind)
    sandbox = SANDBOXES.get("local")(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    try:
        fresh = await sandbox.open(suite.task("count-lines"), 1, "reuse0000000000001")
        modes = {name: stat.S_IMODE(os.lstat(fresh.root / name).st_mode) for name in FOLDERS}
        await agent_does(fresh, (LEFT + (BESIDE if kind == "local-unwalled" else "")).format(outside=outside))
        first = fresh.root
        # The daemon dies of the group's kill a moment after the agent: until then the root is
        # removed, not reused (test_a_root_whose_processes_may_still_run_is_removed_not_reused).
        await eventually(fresh.group.empty, "the first trial's group to empty")
        await fresh.cleanup()
        await procs.BACKGROUND.drain()
        assert sandbox.pool, "the finished trial's root was not kept for reuse"

        reused = await sandbox.open(suite.task("count-lines"), 2, "reuse0000000000002")
        try:
            assert sandbox.pool.reused == 1 and not first.exists() and reused.root.parent == first.parent
            assert reused.root.name.startswith(f"t2-r{cgroups.owner_key()}-")
            seeded = _entries(reused.root)
            accounts = ["group", "passwd"] if kind == "local" else []  # the new trial's own, made afresh
            assert sorted(seeded) == sorted([*FOLDERS, *accounts])  # root-file gone, scratch back
            assert seeded["home"] == seeded["tmp"] == seeded["scratch"] == []
            seed = suite.task("count-lines").workspace_seed
            assert seeded["workspace"] == (sorted(os.listdir(seed)) if seed else [])
            # The runner's; with a uid of its own, the trial's group may pass and list it (one bind
            # of the whole root in its view) but make nothing in it.
            root_info = os.stat(reused.root)
            if reused.walls.uid is not None:
                assert (root_info.st_mode & 0o7777, root_info.st_uid, root_info.st_gid) == \
                    (0o750, os.getuid(), reused.walls.uid)
            else:
                assert root_info.st_mode & 0o7777 == 0o700
            for name in FOLDERS:
                info = os.lstat(reused.root / name)
                assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == modes[name], name
                assert [a for a in os.listxattr(reused.root / name) if not a.startswith("security.")] == [], name
                if reused.walls.uid is not None:  # given to the new trial's own uid, not the last one's
                    assert info.st_uid == reused.walls.uid != fresh.walls.uid, name
            # Nothing followed out: the link's target and the host's files are as they were.
            assert sorted(os.listdir(outside)) == ["keep.txt"] and secret.read_text() == SECRET
            assert not [p for p in procs.processes_by_token({"reuse0000000000001"}).values() if p]
            # The next agent sees its own folders only.
            listed = await agent_does(reused, "ls -A ../home ../tmp; ls -A .. | sort | tr '\\n' ' '")
            assert not {"note.txt", "pipe", "up"} & set(listed.split()), listed
            assert listed.split()[-len(seeded):] == sorted(seeded)  # its folders (and its passwd, group)
        finally:
            await reused.cleanup()
    finally:
        await procs.BACKGROUND.drain()
        await sandbox.close()
    assert not reused.root.exists()  # the sandbox closed: nothing of ours is left behind


class _Group:
    def __init__(self, empty: bool):
        self._empty = empty

    def empty(self) -> bool:
        return self._empty


def _root(tmp_path: Path, name: str = "t1-r1-1-abc") -> Path:
    root = tmp_path / name
    root.mkdir(mode=0o700)
    for folder in FOLDERS:
        (root / folder).mkdir()
    return root


@pytest.mark.parametrize("group", [None, _Group(empty=False)], ids=["no group", "group still running"])
def test_a_root_whose_processes_may_still_run_is_removed_not_reused(tmp_path, group):
    """Without a group, or with one still populated, something of the trial may still write there."""
    pool = RootPool()
    root = _root(tmp_path)
    pool.offer(root, group)
    assert not pool and not root.exists()


def test_a_root_swapped_for_a_link_is_not_followed(tmp_path):
    """The agent replaced its whole root with a link to a host folder: neither reused nor emptied."""
    outside, _ = host_files(tmp_path)
    (outside / "keep.txt").write_text("host file")
    for folder in FOLDERS:
        (outside / folder).mkdir()
    link = tmp_path / "t1-r1-1-abc"
    link.symlink_to(outside)
    pool = RootPool()
    pool.offer(link, _Group(empty=True))
    assert not pool and sorted(os.listdir(outside)) == sorted([*FOLDERS, "keep.txt"])


def test_a_closed_pool_removes_what_comes_back(tmp_path):
    pool = RootPool()
    kept = _root(tmp_path, "t1-r1-1-a")
    pool.offer(kept, _Group(empty=True))
    assert pool
    pool.clear()
    late = _root(tmp_path, "t2-r1-1-b")
    pool.offer(late, _Group(empty=True))
    assert not pool and not kept.exists() and not late.exists()
