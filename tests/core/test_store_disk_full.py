"""The store writer on a disk that fills up (a small tmpfs, so root only): a batch of events
that cannot be written stays in memory, a call that failed on the full disk waits and goes
through once there is room, the runner is told when the disk fills and when it has room
again, and nothing is lost or doubled."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.store.writer import StoreWriter
from tests.conftest import need
from tests.waiting import wait_for


@pytest.fixture
def small_disk(tmp_path):
    need(os.geteuid() == 0, "mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder):
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_a_full_disk_holds_writes_and_loses_nothing(small_disk):
    db = small_disk / "store.db"
    told: list[tuple[bool, str]] = []
    writer = StoreWriter(db, on_full=lambda full, why: told.append((full, why)))
    try:
        trial = writer.call(lambda s, row: s.runs.insert_trial(row), {"suite_id": "s", "task_id": "t", "model": "m",
                                                                      "cli": "c", "trial_index": 1,
                                                                      "status": "running"}).result()
        writer.add_events([(trial, seq, 0.0, "assistant", "stdout", f"before {seq}", None) for seq in range(1, 51)])
        wait_for(lambda: Store(db).event_count(trial) == 50, "the first events written")
        filler = fill(small_disk)
        # Enough text that the store must grow: these cannot be written now.
        writer.add_events([(trial, seq, 0.0, "assistant", "stdout", "x" * 4000, None) for seq in range(51, 301)])
        wait_for(lambda: told and told[-1][0], "the writer to say the disk is full")
        assert "disk is full" in told[-1][1] and str(db) in told[-1][1]
        # Its events go first, so this call cannot go through while the disk is full: it waits
        # (on old code it failed with "database or disk is full").
        finished = writer.call(lambda s, *a: s.runs.update_trial(*a), trial, {"status": "passed"})
        filler.unlink()
        assert finished.result(timeout=300) is None
        wait_for(lambda: told[-1] == (False, ""), "the writer to say there is room again")
    finally:
        writer.close()
    store = Store(db)
    seqs = [row[0] for row in store.events(trial)]
    assert seqs == list(range(1, 301))  # nothing lost, nothing doubled
    assert store.trial(trial)["status"] == "passed"
    assert [full for full, _ in told] == [True, False]
