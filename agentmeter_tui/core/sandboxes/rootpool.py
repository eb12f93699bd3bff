"""Trial folders reused: a finished trial's root, emptied, becomes the next trial's.

Why: on ext4 without a journal (this machine kind; many VMs' scratch disks) each new inode is
found by skipping, one by one, every inode freed in the last minutes (the kernel's
``recently_deleted()``). A trial made five folders and removed five, so at hundreds of trials
a second making and removing them cost about 15 % of the run's CPU and the largest share of a
trivial trial's latency (perf, ``benchmarks/overhead.py``). A reused root costs one rename.

The wall stays where it was. A root is reused only when:

- its trial had a process group (cgroups) and that group is empty: nothing the trial started
  runs any more, so nothing can write into the root once another trial has it (without a group
  the root is removed, as before);
- it is emptied as a removed root is (``hostfs.remove_tree``: no link followed, no recursion);
- the root and its folders are still plain folders of ours, set back to the modes new ones
  get (0700 for the root, as mkdtemp makes it) with no extended attribute but the security module's (an ACL, a setgid bit or an attribute an agent
  left must not reach the next trial).

Anything else, or any error, and the root is removed as before. The pool holds at most
``KEEP`` roots; the sandbox removes what is left when the runner stops.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import secrets
import stat
import threading
from pathlib import Path

from .. import cgroups
from . import hostfs

FOLDERS = ("workspace", "home", "tmp", "scratch")  # a trial root's folders (LocalSandbox._open)
KEEP = 64  # roots kept for reuse (a run's concurrency rarely passes it)


class RootPool:
    """Empty trial roots under one sandbox folder, ready for the next trial."""

    def __init__(self) -> None:
        self._roots: collections.deque[Path] = collections.deque()
        self._lock = threading.Lock()  # offered from the removal thread, taken on the loop or a thread
        self.reused = 0
        self.closed = False  # the sandbox closed: what comes back now is removed

    def __bool__(self) -> bool:
        return bool(self._roots)

    def take(self, name: str) -> Path | None:
        """A pooled root renamed to ``name`` + a random tail, or None (make a new one)."""
        with self._lock:
            if not self._roots:
                return None
            root = self._roots.popleft()
        target = root.with_name(f"{name}{secrets.token_hex(4)}")
        try:
            if os.path.lexists(target):  # never over another folder (rename would replace an empty one)
                raise FileExistsError(target)
            os.rename(root, target)
        except OSError:
            remove_root(root)
            return None
        self.reused += 1
        return target

    def offer(self, root: Path, group: cgroups.Group | None, uid: int | None = None) -> None:
        """A finished trial's root: kept for reuse when it is safe to (module docstring), else
        removed. ``uid``: the trial's own, which its folders were given to (they come back to us)."""
        with self._lock:
            full = self.closed or len(self._roots) >= KEEP
        if not (full or group is None or not group.empty() or not _emptied(root, uid)):
            with self._lock:
                if not self.closed:  # closed meanwhile: nobody would take it, or remove it
                    self._roots.append(root)
                    return
        remove_root(root)

    def clear(self) -> None:
        """Remove every pooled root, and any offered later (the sandbox is closing)."""
        with self._lock:
            roots, self._roots = list(self._roots), collections.deque()
            self.closed = True
        for root in roots:
            remove_root(root)


def _emptied(root: Path, uid: int | None = None) -> bool:
    """Empty ``root``'s folders and reset them (owner included); False when it is not fit to reuse."""
    try:
        if not _ours(root):
            return False
        for name in os.listdir(root):
            path = root / name
            if name in FOLDERS and _ours(path, uid):
                _empty(path)
            else:  # anything else the agent left at the top, a folder of ours swapped for a link too
                _discard(path)
        for name in FOLDERS:
            path = root / name
            if not os.path.lexists(path):
                path.mkdir(mode=0o700)
            _reset(path, 0o777 & ~_umask())
        _reset(root, 0o700)
        return True
    except OSError:
        return False


def _ours(path: Path, uid: int | None = None) -> bool:
    """A real folder of the runner's (or of the trial's own ``uid``, which the runner gave it)."""
    info = os.lstat(path)
    return stat.S_ISDIR(info.st_mode) and info.st_uid in (os.getuid(), uid)


def _empty(folder: Path) -> None:
    for name in os.listdir(folder):
        _discard(folder / name)


def _discard(path: Path) -> None:
    """A folder removed as a trial's root is (no link followed, no recursion); anything else unlinked."""
    if stat.S_ISDIR(os.lstat(path).st_mode):
        hostfs.remove_tree(path)
    else:
        os.unlink(path)


def _reset(folder: Path, mode: int) -> None:
    info = os.lstat(folder)
    if (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):  # given to the trial's uid: back to ours
        os.lchown(folder, os.getuid(), os.getgid())
    os.chmod(folder, mode)  # a folder of ours (lstat), and nothing of the trial runs to swap it
    for attribute in os.listxattr(folder, follow_symlinks=False):
        if not attribute.startswith("security."):
            os.removexattr(folder, attribute, follow_symlinks=False)


@functools.cache
def _umask() -> int:
    """This process's umask, read without changing it (os.umask would, for every thread)."""
    with contextlib.suppress(OSError, ValueError, StopIteration), open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    return 0o022


def remove_root(root: Path) -> None:
    """A trial's root gone, whatever the agent left in it (``hostfs.remove_tree``)."""
    with contextlib.suppress(OSError):
        hostfs.remove_tree(root)
