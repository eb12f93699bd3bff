"""Process trees: finding every process a trial started, and killing all of them.

The agent CLIs start their tool shells with setsid, so neither the agent's process group nor
its session reaches them, and once the agent dies they are re-parented away. Three nets catch
them: (1) the runner is a child subreaper, so orphans re-parent to it instead of init; (2) the
tree is collected before any signal is sent and re-collected while the ladder runs; (3) every
trial's processes carry ``AGENTMETER_TRIAL=<token>`` in their environment, which survives
setsid and re-parenting, so a final sweep finds stragglers by token (also after a runner crash).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import time

import psutil

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


def processes_with_token(token: str, candidates: list[psutil.Process] | None = None) -> list[psutil.Process]:
    """Processes whose environment carries ``AGENTMETER_TRIAL=token``."""
    needle = token
    found = []
    my_uid = os.getuid()
    for proc in candidates if candidates is not None else psutil.process_iter():
        try:
            if my_uid and proc.uids().real != my_uid:
                continue
            if proc.environ().get(TOKEN_VAR) == needle:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


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


def reap_orphans(exclude: set[int]) -> None:
    """Collect zombie children that re-parented to us (we are their subreaper).

    Only pids we did not start ourselves are reaped: asyncio's child watcher must keep
    getting the exit status of the agent processes it waits for.
    """
    try:
        children = psutil.Process().children()
    except psutil.NoSuchProcess:
        return
    for child in children:
        if child.pid in exclude:
            continue
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.NoSuchProcess, ChildProcessError, OSError):
            pass


async def kill_ladder(root_pid: int | None, token: str | None, *, int_grace: float, grace: float,
                      exited: asyncio.Event | None = None) -> None:
    """SIGINT, then SIGTERM, then SIGKILL to every process of the trial; return when none is left.

    ``exited`` is set when the agent process itself has exited: from then on whatever is left
    is an orphaned tool or background job, which gets SIGKILL at once instead of waiting out
    the grace periods.
    """
    start = time.monotonic()
    members = _collect(root_pid, token, [], scan_env=True)
    signal_all(members, signal.SIGINT)
    sent_term = False
    while True:
        members = alive(_collect(root_pid, None, members))
        if not members and token:
            # The tree looks empty: confirm by token, which finds setsid'd stragglers too.
            members = alive(processes_with_token(token))
        if not members:
            return
        elapsed = time.monotonic() - start
        agent_gone = exited is not None and exited.is_set()
        if agent_gone or elapsed >= grace:
            signal_all(members, signal.SIGKILL)
        elif elapsed >= int_grace and not sent_term:
            signal_all(members, signal.SIGTERM)
            sent_term = True
        await asyncio.sleep(0.02)
        if elapsed > grace + 10:
            raise RuntimeError(f"processes survive SIGKILL: {[p.pid for p in members]}")


def sweep(token: str, root_pid: int | None = None) -> int:
    """SIGKILL whatever is left of a trial at once; return how many processes were killed."""
    members = alive(_collect(root_pid, token, [], scan_env=True))
    signal_all(members, signal.SIGKILL)
    deadline = time.monotonic() + 3
    while alive(members) and time.monotonic() < deadline:
        time.sleep(0.005)
    return len(members)


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
