"""Where things live: the agent CLIs' install root, the runner's socket and lock files, and
our own folders in the shared temporary directory (:func:`private_folder`)."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
SOURCE_ROOT = PACKAGE_ROOT.parent

# The store a command opens without --db, in the working directory.
DEFAULT_DB = "agentmeter.db"


def default_clis_root() -> Path:
    """``$AGENTMETER_CLIS_DIR``, else ``.clis`` in a source checkout, else the user's data dir."""
    configured = os.environ.get("AGENTMETER_CLIS_DIR")
    if configured:
        return Path(configured).resolve()
    if (SOURCE_ROOT / "pyproject.toml").is_file():
        return SOURCE_ROOT / ".clis"
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "agentmeter" / "clis"


def builtin_dir(kind: str) -> Path:
    """A folder of built-in data (``suites`` or ``themes``): inside an installed package (a
    wheel carries them under ``_builtin/``, see setup.py), else the checkout's own folder."""
    from importlib.resources import files

    packaged = files("agentmeter_tui") / "_builtin" / kind
    if packaged.is_dir():
        return Path(str(packaged))
    return SOURCE_ROOT / kind


def suites_root() -> Path:
    return builtin_dir("suites")


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


class ForeignFolder(RuntimeError):
    """A folder of ours in the shared temporary directory is not ours (its path is named)."""


def private_folder(path: Path, mode: int = 0o700) -> Path:
    """``path``, a folder of ours in a place other users share (``$TMPDIR/agentmeter-<uid>``,
    ``/tmp/agentmeter``, the kept workspaces): made with ``mode`` (0700) when missing, and on
    every use checked with ``lstat``: a link, something not a folder, or a folder of another
    owner is refused (:class:`ForeignFolder`, naming the path): another local user who made it
    first would otherwise hold what we put there, or swap our socket for theirs. A folder of
    ours in another mode (an older version made it) is set to ``mode`` first."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ForeignFolder(f"{path} is {'a link' if stat.S_ISLNK(info.st_mode) else 'not a folder'}, "
                            "not our own folder: refusing to use it (remove it, or set TMPDIR elsewhere)")
    if info.st_uid != os.getuid():
        raise ForeignFolder(f"{path} belongs to uid {info.st_uid}, not to us (uid {os.getuid()}): refusing to "
                            "use it (remove it, or set TMPDIR elsewhere)")
    if stat.S_IMODE(info.st_mode) != mode:  # opened to others by an older version, or closed by one
        os.chmod(path, mode, follow_symlinks=False)
    return path


def shared_tmp(name: str) -> Path:
    """Our folder ``name`` in the temporary directory, checked (:func:`private_folder`)."""
    return private_folder(Path(tempfile.gettempdir()) / name)


def socket_path(db: Path) -> Path:
    """The control socket beside the DB, or (when that path is too long for AF_UNIX, 107
    bytes) a private folder under the temp dir keyed by the DB's absolute path."""
    candidate = db.resolve().with_name(db.name + ".sock")
    if len(str(candidate).encode()) < 100:
        return candidate
    digest = hashlib.sha256(str(db.resolve()).encode()).hexdigest()[:16]
    return shared_tmp(f"agentmeter-{os.getuid()}") / f"{digest}.sock"


def runner_log_path(db: Path) -> Path:
    return db.with_name(db.name + ".runner.log")


def owner_only(path: Path, *, create: bool = True) -> None:
    """Make ``path`` readable and writable by its owner alone (0600), creating it so when
    missing. The store, its WAL, the runner's log and lock hold transcripts and usage, which
    other local users must not read; a file of another owner is left as it is.

    An existing file is never opened here: closing any descriptor of a file drops every POSIX
    lock this process holds on it, SQLite's included. Opening the store's shm file beside a
    live connection once released that connection's lock on it; the runner, seeing no other
    reader, reset the shared memory, and the process that still had it mapped died of SIGBUS."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        if not create:
            return
        try:  # a new inode: nobody can hold a lock on it yet
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return
        except FileExistsError:  # made by another process meanwhile
            status = os.stat(path)
    if status.st_uid == os.getuid() and status.st_mode & 0o077:
        os.chmod(path, 0o600)
