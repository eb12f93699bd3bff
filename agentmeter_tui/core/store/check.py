"""Is the file given as ``--db`` a store we can open, before SQLite is asked to (issue 24.7).

SQLite answers a folder, a file of random bytes or a truncated store with a
``sqlite3.DatabaseError`` from whichever query comes first, deep in a command, and it happily
writes into a file whose middle is garbage. So a store is checked when it opens: a folder,
a missing file (where the command does not create one), a file that does not start with
SQLite's header, one shorter than its header says, one SQLite finds damaged, one that cannot
be written by a command that writes: each is a :class:`StoreError`, one line naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path

HEADER = b"SQLite format 3\x00"


# (device, inode) of every store this process has opened through SQLite: never reopened by hand.
_OPENED: set[tuple[int, int]] = set()


def opened(path: Path) -> None:
    """``path`` is open through SQLite in this process from now on (see :func:`check_file`)."""
    status = path.stat()
    _OPENED.add((status.st_dev, status.st_ino))


class StoreError(Exception):
    """A ``--db`` that is not a store we can use; the message names the file and why."""

    def __init__(self, path: Path | str, why: str):
        self.path, self.why = Path(path), why
        super().__init__(f"{path}: {why}")


def check_file(path: Path, *, create: bool, write: bool) -> bool:
    """Raise :class:`StoreError` if ``path`` cannot be a store; True when it exists.

    ``create``: a missing file is fine (the caller makes a new store); ``write``: the caller
    writes, so a read-only file or folder is refused up front instead of failing midway."""
    if path.is_dir():
        raise StoreError(path, "is a folder, not a store file")
    if not path.exists():
        if not create:
            raise StoreError(path, "no such store")
        if not path.parent.is_dir():
            raise StoreError(path, f"no such store, and no folder {path.parent} to make one in")
        if write and not os.access(path.parent, os.W_OK):
            raise StoreError(path, f"cannot create a store here: {path.parent} is read-only")
        return False
    if not path.is_file():
        raise StoreError(path, "not a regular file")
    status = path.stat()
    if (status.st_dev, status.st_ino) in _OPENED:
        # This process has the store open already (checked then): reading its header again would
        # open and close a descriptor of it, and closing any descriptor of a file drops every
        # POSIX lock the process holds on it, SQLite's included (see paths.owner_only): another
        # process could then write under a live connection and damage the store.
        if write and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
            raise StoreError(path, "read-only (this command writes to the store)")
        return True
    try:
        with open(path, "rb") as handle:
            head = handle.read(100)
    except OSError as exc:
        raise StoreError(path, exc.strerror or str(exc)) from None
    size = path.stat().st_size
    if size == 0:
        return True  # an empty file is a new store to SQLite
    if not head.startswith(HEADER) or len(head) < 100:
        raise StoreError(path, "not an agentmeter store (not a SQLite database)")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    # The header's page count is valid when its "version valid for" matches the change counter,
    # and says the file's size only while no write-ahead log holds pages: a checkpoint (a runner
    # closing the store as a client opens it) writes page 1, with the new count, before the
    # pages that grow the file, and a finished run's store was once refused as truncated.
    wal = path.with_name(path.name + "-wal")
    logged = wal.exists() and wal.stat().st_size > 0
    if head[92:96] == head[24:28] and pages and size < pages * page_size and not logged:
        raise StoreError(path, f"truncated ({size} bytes of the {pages * page_size} its header gives)")
    if write and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise StoreError(path, "read-only (this command writes to the store)")
    return True


def damage(conn) -> str | None:
    """What SQLite's quick check finds wrong with an open store, or None when it is sound.

    It reads every page (2-6 ms a MB, benchmarks/store_check.py): garbage anywhere in the
    file is found before a write, not after. Only writers pay it; commands that only read open without it."""
    import sqlite3

    try:
        rows = [r[0] for r in conn.execute("pragma quick_check(3)")]
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if rows == ["ok"] else "; ".join(str(r) for r in rows)
