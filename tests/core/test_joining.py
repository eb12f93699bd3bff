"""A walled local trial joins its cgroup through bwrap's info and block pipes, not an ``sh``
exec (core/sandboxes/joining.py): bwrap, its child and what the command forks are in the
trial's group before the command runs; a move that fails kills bwrap and its child and runs
nothing; a bwrap that ends before (or right after) it writes its info gives its usual error."""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentmeter_tui.core import cgroups, procs
from agentmeter_tui.core.sandboxes import isolation, joining
from agentmeter_tui.core.sandboxes.base import LaunchSpec
from agentmeter_tui.core.sandboxes.local import LocalSandbox
from tests.conftest import need
from tests.core.sandbox_support import unique_id
from tests.core.test_cgroups import forced_hierarchy  # noqa: F401 - the fixture `forced`: each hierarchy in turn
from tests.waiting import FAILSAFE, eventually, pid_running

CGROUPS = "cat /proc/self/cgroup; sh -c 'cat /proc/self/cgroup'"  # the command's, and a child's


@asynccontextmanager
async def walled(tmp_path):
    need(isolation.bwrap() is not None, "bwrap is not on PATH")
    sandbox = LocalSandbox(None, {"root": str(tmp_path / "trials")})
    await sandbox.preflight()
    token = f"join{unique_id('t')[-6:]}00000"
    session = await sandbox.open(SimpleNamespace(workspace_seed=None), 1, token)
    assert session.group is not None and session.walls is not None and session.walls.program is not None
    try:
        yield session
    finally:
        await session.cleanup()
        await sandbox.close()
        await procs.BACKGROUND.drain()


class Output:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ready = asyncio.Event()

    def __call__(self, stream: str, batch: list[bytes]) -> None:
        self.lines += [line.decode() for line in batch]
        if "ready" in self.lines:
            self.ready.set()


def _in_group(lines: list[str], group: cgroups.Group) -> list[str]:
    """The lines of /proc/self/cgroup that put their process in ``group``: the unnamed
    hierarchy's in v2, the controller's in v1."""
    found = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        ours = controllers == "" if group.hierarchy.version == 2 else group.hierarchy.controller in controllers.split(",")
        if ours and line.count(":") >= 2 and path.endswith("/" + group.name):
            found.append(line)
    return found


async def test_bwrap_its_child_and_what_the_command_forks_are_in_the_group_first(tmp_path, forced):
    async with walled(tmp_path) as session:
        gate = os.path.join(session.scratch, "gate")
        out = Output()
        # the command's and its child's own view, then bwrap's pids checked while it waits on a fifo
        script = f"{CGROUPS}; mkfifo {gate} && echo ready && cat {gate}"
        agent = await session.start(LaunchSpec(["sh", "-c", script], {}), out)
        await asyncio.wait_for(out.ready.wait(), FAILSAFE)
        members = set(session.group.pids())
        assert agent.pid in members  # bwrap's monitor
        assert len(members) >= 3  # its child (the namespace's pid 1) and the command
        with open(gate, "w") as fifo:
            fifo.write("go\n")
        assert await agent.wait() == 0, out.lines
        assert len(_in_group(out.lines, session.group)) == 2, out.lines


async def test_the_verifier_exec_joins_the_group_too(tmp_path, forced):
    async with walled(tmp_path) as session:
        done = await session.exec(["sh", "-c", CGROUPS])
        assert done.exit_code == 0, done
        assert len(_in_group(done.stdout.decode().splitlines(), session.group)) == 2, done.stdout


@pytest.mark.parametrize("step", ["start", "exec"])
async def test_a_move_that_fails_kills_bwrap_and_its_child_and_runs_nothing(tmp_path, monkeypatch, step):
    killed: list[int] = []
    kill = joining._kill
    monkeypatch.setattr(joining, "_kill", lambda *pids: (killed.extend(pids), kill(*pids)))
    async with walled(tmp_path) as session:
        marker = os.path.join(session.scratch, "ran")
        argv = ["sh", "-c", f"touch {marker}"]
        group = session.group
        session.group = cgroups.Group(group.hierarchy, group.path / "gone")  # its cgroup.procs is not there
        try:
            with pytest.raises(joining.JoinError, match="could not join its cgroup"):
                if step == "start":
                    await session.start(LaunchSpec(argv, {}), lambda stream, batch: None)
                else:
                    await session.exec(argv)
        finally:
            session.group = group
        assert len(killed) == 2  # the child and bwrap
        await eventually(lambda: not any(pid_running(pid) for pid in killed), "bwrap and its child gone")
        await eventually(lambda: not procs.alive(procs.processes_with_token(session.token)), "nothing of the trial")
        assert not os.path.exists(marker)


@pytest.mark.parametrize("bad", [["--no-such-option"], ["--ro-bind", "/no/such/folder", "/x"]],
                         ids=["before its info", "after its info"])
async def test_a_bwrap_that_ends_early_gives_its_usual_error(tmp_path, monkeypatch, bad):
    """An unknown option ends bwrap before it writes its info (the info pipe's end); a missing
    bind ends its child after it (the move may find it gone): either way the trial sees bwrap's
    exit and its message, as before the handshake, and nothing hangs."""
    argv_for = isolation.argv_for
    monkeypatch.setattr(isolation, "argv_for", lambda *a, **k: [(full := argv_for(*a, **k))[0], *bad, *full[1:]])
    async with walled(tmp_path) as session:
        out = Output()
        agent = await asyncio.wait_for(session.start(LaunchSpec(["true"], {}), out), FAILSAFE)
        assert await asyncio.wait_for(agent.wait(), FAILSAFE) == 1
        assert any(line.startswith("bwrap:") for line in out.lines), out.lines


def test_the_pipes_stay_clear_of_stdio():
    """A runner started with stdin closed gets fd 0 for a new pipe: the spawn would put its own
    stdin there, over bwrap's pipe."""
    saved = os.dup(0)
    os.close(0)
    try:
        with joining.Handshake(cgroups.Group(cgroups.Hierarchy(2, Path("/unused")), Path("/unused"))) as handshake:
            assert min(handshake.fds) > 2
    finally:
        os.dup2(saved, 0)
        os.close(saved)


async def test_a_spawn_given_up_before_its_join_kills_what_bwrap_named(tmp_path, monkeypatch, forced):
    """Given up between the spawn and the join (a cancel of the verifier's spawn, a failure on
    the way out of the trial's network namespace), the info written and the child waiting on
    the block pipe: leaving the handshake kills bwrap and the child its info names before the
    block pipe closes, whose end of file would let the child run the command outside the group."""
    need(isolation.bwrap() is not None, "bwrap is not on PATH")
    killed: list[int] = []
    kill = joining._kill
    monkeypatch.setattr(joining, "_kill", lambda *pids: (killed.extend(pids), kill(*pids)))
    group = cgroups.new_group(f"join{unique_id('t')[-6:]}")
    assert group is not None
    marker = tmp_path / "ran"
    try:
        with joining.Handshake(group) as handshake:
            argv = handshake.argv([str(isolation.bwrap()), "--bind", "/", "/", "--unshare-pid", "--",
                                   "sh", "-c", f"touch {marker}"])
            proc = subprocess.Popen(argv, pass_fds=handshake.fds, stdin=subprocess.DEVNULL)
            handshake.started(proc.pid)
            readable, _, _ = select.select([handshake._info_r], [], [], FAILSAFE)  # its info is there
            assert readable
        assert proc.wait(FAILSAFE) == -9
        assert len(killed) == 2, killed  # bwrap and the child its info named
        await eventually(lambda: not any(pid_running(pid) for pid in killed), "bwrap and its child gone")
        assert not marker.exists()
    finally:
        group.remove()
