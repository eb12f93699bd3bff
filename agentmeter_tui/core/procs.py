"""Process trees: finding every process a trial started, and killing all of them.

The agent CLIs start their tool shells with setsid, so neither the agent's process group nor
its session reaches them, and once the agent dies they are re-parented away. The kernel's
answer is a cgroup per trial (:mod:`.cgroups`): nothing a process does takes it out of its
group, so the ladder below ends with the whole group. Where no cgroup can be made, three
weaker nets remain: (1) the runner is a child subreaper, so orphans re-parent to it instead
of init; (2) the tree is collected before any signal is sent and re-collected while the
ladder runs; (3) every trial's processes carry ``AGENTMETER_TRIAL=<token>`` in their
environment, which survives setsid and re-parenting (not ``env -i``), so a final sweep finds
stragglers by token.
"""

from __future__ import annotations

from collections.abc import Collection

import asyncio
import ctypes
import os
import signal
import time

import psutil

from .cgroups import Group

TOKEN_VAR = "AGENTMETER_TRIAL"
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def tree(pid: int) -> list[psutil.Process]:
    """``pid`` and its descendants that are still alive."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def processes_by_token(tokens: set[str]) -> dict[str, list[psutil.Process]]:
    """One scan of every process's environment: those carrying ``AGENTMETER_TRIAL`` in ``tokens``."""
    found: dict[str, list[psutil.Process]] = {}
    my_uid = os.getuid()
    for proc in psutil.process_iter():
        try:
            if my_uid and proc.uids().real != my_uid:
                continue
            token = proc.environ().get(TOKEN_VAR)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if token in tokens:
            found.setdefault(token, []).append(proc)
    return found


def processes_with_token(token: str) -> list[psutil.Process]:
    """Processes whose environment carries ``AGENTMETER_TRIAL=token``."""
    return processes_by_token({token}).get(token, [])


def signal_all(procs: list[psutil.Process], sig: int) -> None:
    for proc in procs:
        try:
            proc.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.NoSuchProcess:
            pass
    return out


class OwnChildren:
    """The children we spawned ourselves, whose exit status asyncio's child watcher must get.

    ``spawning`` counts spawns in progress: between fork and the moment the pid is known, a
    fast child may already be a zombie, and reaping it then would steal its exit status.
    """

    def __init__(self) -> None:
        self.spawning = 0
        self.pids: set[int] = set()


OWN_CHILDREN = OwnChildren()


_PR_GET_CHILD_SUBREAPER = 37


def strays(token: str) -> bool:
    """Whether a process of the trial may still run. The runner is the subreaper of its
    descendants: whatever an agent left re-parented to it, so only the trees under children it
    did not start itself (``OWN_CHILDREN``: agents and execs; the model server is one it
    did not) can hold one, and a few environments read there are far cheaper than the token
    scan of every process. Not a subreaper, or no /proc: assume there may be."""
    flag = ctypes.c_int(0)
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0 \
                or not flag.value or OWN_CHILDREN.spawning:
            return True
        todo = list(_children("self") - OWN_CHILDREN.pids)
    except (OSError, AttributeError, ValueError):
        return True
    mark = f"{TOKEN_VAR}={token}".encode()
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if mark in environ.read().split(b"\0"):
                    return True
            todo.extend(_children(str(pid)))
        except (OSError, ValueError):  # gone meanwhile, or not ours to read: the scan decides
            return True
    return False


def _children(pid: str) -> set[int]:
    children: set[int] = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listed:
            children.update(int(child) for child in listed.read().split())
    return children


def reap_orphans(exclude: Collection[int] = frozenset()) -> None:
    """Collect zombie children that re-parented to us (we are their subreaper)."""
    if OWN_CHILDREN.spawning:
        return  # try again next round
    try:
        children = psutil.Process().children()
    except psutil.NoSuchProcess:
        return
    for child in children:
        if child.pid in exclude or child.pid in OWN_CHILDREN.pids:
            continue
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.NoSuchProcess, ChildProcessError, OSError):
            pass


async def kill_ladder(root_pid: int | None, token: str | None, *, int_grace: float, grace: float,
                      exited: asyncio.Event | None = None, group: Group | None = None,
                      spare: frozenset[int] = frozenset()) -> None:
    """SIGINT, then SIGTERM, then SIGKILL to every process of the trial; return when none is left.

    ``exited`` is set when the agent process itself has exited: from then on whatever is left
    is an orphaned tool or background job, which gets SIGKILL at once instead of waiting out
    the grace periods. With a ``group``, its members are the trial's processes too (they
    cannot leave it), and the last step kills the group whole. ``spare``: processes that get
    SIGKILL only (a sandbox's own monitors, which would take the agent with them at once).
    """
    start = time.monotonic()
    members = _collect(root_pid, None if group else token, _members(group), scan_env=group is None)
    signal_all([p for p in members if p.pid not in spare], signal.SIGINT)
    sent_term = False
    while True:
        members = alive(_collect(root_pid, None, members + _members(group)))
        if not members and token and group is None:
            # The tree looks empty: confirm by token, which finds setsid'd stragglers too.
            members = alive(processes_with_token(token))
        if not members and (group is None or group.empty()):
            return
        elapsed = time.monotonic() - start
        agent_gone = exited is not None and exited.is_set()
        if agent_gone or elapsed >= grace:
            signal_all(members, signal.SIGKILL)
            if group is not None:
                group.kill()
        elif elapsed >= int_grace and not sent_term:
            signal_all([p for p in members if p.pid not in spare], signal.SIGTERM)
            sent_term = True
        await asyncio.sleep(0.02)
        if elapsed > grace + 10:
            raise RuntimeError(f"processes survive SIGKILL: {[p.pid for p in members]}")


def sweep(token: str, root_pid: int | None = None, group: Group | None = None) -> int:
    """SIGKILL whatever is left of a trial at once; return how many processes were killed."""
    members = alive(_collect(root_pid, None if group else token, _members(group), scan_env=group is None))
    signal_all(members, signal.SIGKILL)
    if group is not None:
        group.kill()
    deadline = time.monotonic() + 3
    while (alive(members) or (group is not None and not group.empty())) and time.monotonic() < deadline:
        time.sleep(0.005)
    return len(members)


def _members(group: Group | None) -> list[psutil.Process]:
    out = []
    for pid in group.pids() if group is not None else []:
        try:
            out.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    return out


def _collect(root_pid: int | None, token: str | None, known: list[psutil.Process],
             scan_env: bool = False) -> list[psutil.Process]:
    """Known members, the descendants of each, and (``scan_env``) every process with the token."""
    members = {p.pid: p for p in known}
    roots = ([root_pid] if root_pid is not None else []) + list(members)
    for pid in roots:
        for proc in tree(pid):
            members.setdefault(proc.pid, proc)
    if token and scan_env:
        for proc in processes_with_token(token):
            members.setdefault(proc.pid, proc)
    return list(members.values())


class Sweeper:
    """Kills what finished trials left behind, in one scan for all of them.

    A scan of every process's environment costs a few milliseconds; doing one per trial
    would be most of a trivial trial's cost. Finished trials hand their token over instead,
    and one scan every ``interval`` seconds covers them all; a token is kept for a few scans
    after its last catch, because a straggler may still be forking. ``final`` is the last,
    synchronous sweep when the runner stops.
    """

    def __init__(self, interval: float = 0.25, keep_scans: int = 3):
        self.interval = interval
        self.keep_scans = keep_scans
        self._pending: dict[str, int] = {}  # token -> scans left
        self._groups: dict[str, Group] = {}  # groups to kill and remove, by path
        self.killed = 0

    def add(self, token: str, group: Group | None = None) -> None:
        """A finished trial: its group (no environment scan needed), else its token."""
        if group is not None:
            self._groups[str(group.path)] = group
        else:
            self._pending[token] = self.keep_scans

    def add_all(self, tokens: set[str]) -> None:
        for token in tokens:
            self.add(token)

    def scan_once(self) -> int:
        killed = 0
        for key, group in list(self._groups.items()):
            killed += len(group.pids())
            if group.remove(wait=0):
                del self._groups[key]
        self.killed += killed
        if not self._pending:
            return killed
        tokens = set(self._pending)
        by_token = processes_by_token(tokens)
        found = [proc for procs in by_token.values() for proc in procs]
        for token in by_token:
            self._pending[token] = self.keep_scans
        signal_all(found, signal.SIGKILL)
        for token in tokens:
            self._pending[token] -= 1
            if self._pending[token] <= 0:
                del self._pending[token]
        self.killed += len(found)
        return killed + len(found)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if self._pending or self._groups:
                await asyncio.to_thread(self.scan_once)

    def final(self) -> int:
        total = 0
        while self._pending or self._groups:
            total += self.scan_once()
            if self._pending or self._groups:
                time.sleep(0.02)
        return total


SWEEPER = Sweeper()


class Background:
    """Work a trial hands off after its final row (removing a workspace): the runner waits
    for all of it before it reports the run finished."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task] = set()

    def run(self, coro) -> asyncio.Future:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def drain(self) -> None:
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


BACKGROUND = Background()
