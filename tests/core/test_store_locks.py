"""SQLite's locks are POSIX locks, owned by the process: closing any descriptor of a file
drops all of them. A process that opened a second store connection used to open and close
the shm file beside it, releasing the first connection's hold on the shared memory; the
runner then reset that memory under it, and the process died of SIGBUS (a CI run lost a
pytest worker that way)."""

from __future__ import annotations

import subprocess
import sys

from agentmeter_tui.core.store import Store

# Run in another process, since a process never conflicts with its own POSIX locks. Byte 128
# of the shm file is SQLite's "DMS" lock (os_unix.c: UNIX_SHM_BASE 120 + SQLITE_SHM_NLOCK 8):
# every connection holds it shared while it has the shared memory mapped, and a connection
# that gets it exclusively believes itself alone and truncates the file.
PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)
except OSError:
    print("held")
else:
    print("free")
"""


def dms_lock(db) -> str:
    return subprocess.run([sys.executable, "-c", PROBE, f"{db}-shm"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_opening_another_connection_keeps_the_first_ones_locks(tmp_path):
    db = tmp_path / "store.db"
    first = Store(db)
    try:
        first.db.execute("select count(*) from sqlite_master").fetchall()  # maps the shm
        assert dms_lock(db) == "held"
        for _ in range(3):  # a probe that polls the store opens a connection each time
            Store(db, readonly=True).close()
            assert dms_lock(db) == "held"
        second = Store(db)
        assert dms_lock(db) == "held"
        second.close()
        assert first.db.execute("select count(*) from sqlite_master").fetchone()[0] > 0
    finally:
        first.close()
    assert not (tmp_path / "store.db-shm").exists() or dms_lock(db) == "free"  # the probe sees a lock


def test_the_store_is_made_owner_only_and_an_open_mode_is_mended(tmp_path):
    db = tmp_path / "store.db"
    Store(db).close()
    assert db.stat().st_mode & 0o777 == 0o600
    db.chmod(0o644)
    Store(db).close()
    assert db.stat().st_mode & 0o777 == 0o600
