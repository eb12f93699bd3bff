"""The uids local trials run as when the runner is root: one per running trial, never one of
two live trials (of this runner or of another on the machine), reused once its trial is done.

They come from a high range no account has (``FIRST`` on, skipping any uid passwd names). A
uid is held by an exclusive ``flock`` on its file in a root-only folder, open for as long as
its trial runs: the kernel drops the lock when the holder closes it or dies, so a runner
killed with kill -9 holds none (its trials died with it: bwrap's ``--die-with-parent``, and
the pid namespace takes every process when its first one ends).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pwd
import stat
import tempfile
import threading
from pathlib import Path

FIRST = 1_900_000_000  # far above any account a distribution or an LDAP directory hands out
COUNT = 1 << 16


class UidPoolError(RuntimeError):
    """No folder of ours to hold the uids' locks in, or every uid of the range taken."""


class UidPool:
    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or Path(tempfile.gettempdir()) / "agentmeter-uids"
        self._held: dict[int, int] = {}  # uid -> descriptor of its lock
        self._lock = threading.Lock()
        self._next = os.getpid() % COUNT  # runners start apart: few collisions to skip

    def _checked_folder(self) -> Path:
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.folder, 0o700)
        info = os.lstat(self.folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise UidPoolError(f"{self.folder}: not a folder of ours with mode 0700; remove it")
        return self.folder

    def take(self) -> int:
        """A uid no live trial has, held until :meth:`give_back`."""
        folder = self._checked_folder()
        with self._lock:
            for _ in range(COUNT):
                uid = FIRST + self._next
                self._next = (self._next + 1) % COUNT
                if uid in self._held or _has_account(uid):
                    continue
                fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._held[uid] = fd
                return uid
        raise UidPoolError(f"all {COUNT} trial uids from {FIRST} are taken")

    def give_back(self, uid: int) -> None:
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)


@functools.lru_cache(maxsize=4096)
def _has_account(uid: int) -> bool:
    """Whether passwd names ``uid`` (asked once per uid and runner: an NSS lookup costs more
    than the rest of taking a uid, and no account appears in this range while a run goes)."""
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def write_accounts(root: Path, uid: int, name: str, home: str) -> None:
    """The trial's own /etc/passwd and /etc/group (node's os.userInfo() and some CLIs need an
    entry for the uid they run as), beside its folders, where the agent cannot write."""
    gid = os.getgid() if uid == os.getuid() else uid
    users = f"root:x:0:0:root:/root:/bin/sh\n{name}:x:{uid}:{gid}:agent:{home}:/bin/sh\n"
    groups = f"root:x:0:\n{name}:x:{gid}:\n"
    for file, text in (("passwd", users), ("group", groups)):
        path = root / file
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.fchmod(fd, 0o644)  # whatever the runner's umask: the agent's uid reads it
            os.write(fd, text.encode())
        finally:
            os.close(fd)
