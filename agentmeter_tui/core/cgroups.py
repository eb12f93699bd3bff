"""Kernel-tracked process groups: one cgroup per trial (and per ``agentmeter meter`` command).

A process cannot leave its cgroup by itself: setsid, a double fork, re-parenting and a
cleared environment all keep it there, so the group is what a kill takes whole and what a
later run or ``doctor --clean`` finds leftovers by. Layout, under the hierarchy's root (or
our own cgroup where the root is not ours to write)::

    agentmeter/<owner>/<token>      owner = "<pid>-<start time>" of the runner (or meter)

so a group whose owner is gone is a leftover, whoever looks. cgroup v2 is preferred (its
``cgroup.kill`` takes the group in one write); v1 (freezer hierarchy preferred: a frozen group
cannot fork while it is killed) where only v1 is mounted; with neither writable, trials run
without a group and only the token sweep and the subreaper catch strays (the note says so).
``AGENTMETER_CONTAINMENT`` = ``cgroup2`` / ``cgroup1`` / ``none`` forces one (tests, operators).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

BASE = "agentmeter"
FORCE_VAR = "AGENTMETER_CONTAINMENT"
#: the first thing an unwalled contained process runs (a meter command, ``isolation = "none"``):
#: join the group, then become the command (a walled trial's bwrap is moved: sandboxes/joining.py)
JOIN = 'echo $$ > "$0" && exec "$@"'


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 2 or 1
    parent: Path  # .../agentmeter
    controller: str = ""  # v1: the hierarchy's controller (freezer, pids, ...)

    def describe(self) -> str:
        if self.version == 2:
            return "cgroup v2" + (" (cgroup.kill)" if _has_kill(self.parent) else "")
        return f"cgroup v1 ({self.controller})"


@dataclass(frozen=True)
class Group:
    hierarchy: Hierarchy
    path: Path

    @property
    def name(self) -> str:
        return f"{BASE}/{self.path.parent.name}/{self.path.name}"

    def join_prefix(self) -> list[str]:
        """argv prefix that puts the command into this group before it runs (pid unchanged)."""
        return ["/bin/sh", "-c", JOIN, str(self.path / "cgroup.procs")]

    def wrap(self, argv: list[str], path_var: str | None, cwd: str | None = None) -> list[str]:
        """``argv`` run in this group. A missing program still raises FileNotFoundError here,
        as a direct spawn would, instead of becoming the shell's exit 127."""
        findable(argv, path_var, cwd)
        return [*self.join_prefix(), *argv]

    def add(self, *pids: int) -> None:
        """Move running processes into this group, whole (``cgroup.procs`` takes a thread group
        in v1 and v2 alike; one open, a write each: v2 takes one pid a write). One already gone
        is skipped: it runs nothing outside. Any other failure (the group gone, no permission)
        raises, and the caller must not let them go on."""
        fd = os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        try:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.write(fd, str(pid).encode())
        finally:
            os.close(fd)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            return []

    def empty(self) -> bool:
        if self.hierarchy.version == 2:
            try:
                return "populated 0" in (self.path / "cgroup.events").read_text()
            except FileNotFoundError:
                return True
        return not self.pids()

    def kill(self) -> None:
        """SIGKILL every member, including ones forking meanwhile."""
        if self.hierarchy.version == 2 and _has_kill(self.hierarchy.parent):
            # once per trial on the run's loop: one open and one write (a group gone is no error)
            with contextlib.suppress(FileNotFoundError):
                fd = os.open(f"{self.path}/cgroup.kill", os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, b"1")
                finally:
                    os.close(fd)
            return
        if not self.path.exists():
            return
        freezer = self.path / "freezer.state"
        frozen = freezer.exists() and _write(freezer, "FROZEN")
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if frozen:
            _write(freezer, "THAWED")  # the kill is delivered once they run again

    def remove(self, wait: float = 5.0) -> bool:
        """Kill what is left, wait until the group is empty, remove it. True when it is gone."""
        deadline = time.monotonic() + wait
        while True:
            self.kill()
            if self.empty():
                try:
                    self.path.rmdir()
                    return True
                except FileNotFoundError:
                    return True
                except OSError:
                    pass  # a member still exiting
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)


def findable(argv: list[str], path_var: str | None, cwd: str | None = None) -> None:
    """FileNotFoundError when ``argv``'s program is missing, as a direct spawn would raise
    (a wrapper around it would turn that into its own exit 127)."""
    exe = argv[0] if os.path.isabs(argv[0]) or "/" not in argv[0] else os.path.join(cwd or ".", argv[0])
    if shutil.which(exe, path=path_var) is None:
        raise FileNotFoundError(2, "No such file or directory", argv[0])


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
        return True
    except OSError:
        return False


@functools.cache
def _has_kill(parent: Path) -> bool:
    # cgroup.kill (Linux 5.14) exists in every non-root group; our parent is one.
    return (parent / "cgroup.kill").exists()


def started(pid: int) -> int:
    """When ``pid`` started, in clock ticks since boot (field 22 of its stat): the kernel's
    count, which no clock change moves. psutil's epoch figure adds the boot time, which moves
    with each step of the clock, so two runners could disagree on a live one's key, and one
    would take the other for gone and kill its trials, remove its folders and containers."""
    return _stat(pid)[1]


def _stat(pid: int) -> tuple[bytes, int]:
    """``pid``'s state letter and start (fields 3 and 22 of /proc/PID/stat), in one read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        raise psutil.NoSuchProcess(pid) from None
    fields = stat.rsplit(b")", 1)[1].split()  # after the name (which may hold spaces): field 3 on
    return fields[0], int(fields[19])


def owner_key(pid: int | None = None) -> str:
    """``<pid>-<start>`` of ``pid`` (default: this process, looked up once)."""
    return _own_key(os.getpid()) if pid is None else _key_of(pid)


def _key_of(pid: int) -> str:
    return f"{pid}-{started(pid)}"


@functools.lru_cache(maxsize=4)
def _own_key(pid: int) -> str:  # keyed by pid: a forked child is another owner
    return _key_of(pid)


def owner_alive(key: str) -> bool:
    """The runner (or meter) of ``key`` still runs: same pid and start time, and not a zombie
    (one killed with kill -9 stays one until its parent reaps it)."""
    pid = key.partition("-")[0]
    if not pid.isdigit():
        return False
    try:
        state, start = _stat(int(pid))
    except psutil.NoSuchProcess:
        return False
    return f"{pid}-{start}" == key and state != b"Z"


def _mounts() -> list[tuple[str, Path, set[str]]]:
    """(fs type, mount point, super options) of each cgroup mount, from /proc/self/mountinfo."""
    out: list[tuple[str, Path, set[str]]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) > 4 and len(rest) > 2 and rest[0] in ("cgroup", "cgroup2"):
            out.append((rest[0], Path(fields[4]), set(rest[2].split(","))))
    return out


def _own_path(controller: str | None) -> str:
    """Our cgroup in the v2 hierarchy (``controller`` None) or in a v1 controller's."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if (controller is None and names == "") or (controller and controller in names.split(",")):
                return path.lstrip("/")
    except (OSError, ValueError):
        pass
    return ""


def _candidates() -> list[Hierarchy]:
    found: list[Hierarchy] = []
    mounts = _mounts()
    for fstype, mount, _ in mounts:
        if fstype == "cgroup2":
            found += [Hierarchy(2, mount / BASE), Hierarchy(2, mount / _own_path(None) / BASE)]
    for wanted in ("freezer", "pids", "cpu"):
        for fstype, mount, options in mounts:
            if fstype == "cgroup" and wanted in options:
                found += [Hierarchy(1, mount / BASE, wanted), Hierarchy(1, mount / _own_path(wanted) / BASE, wanted)]
    force = os.environ.get(FORCE_VAR, "")
    if force in ("cgroup2", "cgroup1"):
        found = [h for h in found if h.version == int(force[-1])]
    return list(dict.fromkeys(found))


def _usable(hierarchy: Hierarchy) -> bool:
    """Whether we can make a group there and move a process into it: tried once, for real."""
    probe = hierarchy.parent / f"probe-{os.getpid()}"
    try:
        probe.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    try:
        group = Group(hierarchy, probe)
        return subprocess.run([*group.join_prefix(), "true"], stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


_PROBING = threading.Lock()


@functools.cache
def hierarchy() -> Hierarchy | None:
    """The hierarchy this process puts groups in, or None (found once per process)."""
    if os.environ.get(FORCE_VAR) == "none":
        return None
    # Trials open their sandboxes on worker threads, so the first few ask at once: probes
    # sharing one folder removed it under each other, and a trial fell back to v1 (or to none).
    with _PROBING:
        return next((h for h in _candidates() if _usable(h)), None)


def describe(group: Group | None = None) -> str:
    """What holds a trial's processes (in ``group``, or in none), for its transcript."""
    if group is None:
        why = "no writable cgroup here" if hierarchy() is None else "no cgroup for this trial"
        return f"processes: {why}; strays are found by the trial token and the subreaper only"
    return f"processes: {group.hierarchy.describe()} group per trial"


def new_group(token: str) -> Group | None:
    """A fresh group for ``token`` under this process's owner folder (None without cgroups)."""
    found = hierarchy()
    if found is None:
        return None
    path = found.parent / owner_key() / token
    path.mkdir(parents=True, exist_ok=True)
    return Group(found, path)


def _all_groups() -> list[tuple[str, Group]]:
    """(owner, group) of every group under every usable-looking parent."""
    out = []
    for candidate in _candidates():
        with contextlib.suppress(OSError):
            for owner in candidate.parent.iterdir():
                # runners' and meters' folders only: not a probe, not the ssh sandbox's "ssh"
                if owner.is_dir() and re.fullmatch(r"\d+-\d+", owner.name):
                    out += [(owner.name, Group(candidate, g)) for g in owner.iterdir() if g.is_dir()]
    return out


def find(tokens: set[str]) -> list[Group]:
    """The groups named by these tokens, whoever made them."""
    return [group for _, group in _all_groups() if group.path.name in tokens]


def clean_leftovers() -> tuple[int, int]:
    """Kill and remove the groups of owners that are gone: (groups removed, processes killed)."""
    removed = killed = 0
    owners: set[Path] = set()
    for owner, group in _all_groups():
        if owner_alive(owner) or not os.access(group.path / "cgroup.procs", os.W_OK):
            continue  # alive, or another user's (root's, seen by an operator's runner): not ours to clean
        killed += len(group.pids())
        removed += group.remove()
        owners.add(group.path.parent)
    for candidate in _candidates():  # empty groups of the ssh sandbox on this machine
        owners.update((candidate.parent / "ssh").glob("*/"))
    for folder in owners:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only an empty one goes
    return removed, killed


def remove_owner_folder() -> None:
    """This process's own folder, once its groups are gone (runner or meter exit)."""
    found = hierarchy()
    if found is not None:
        with contextlib.suppress(OSError, psutil.Error):
            (found.parent / owner_key()).rmdir()
