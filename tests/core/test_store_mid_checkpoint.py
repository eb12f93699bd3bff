"""A store whose main file's header gives more pages than the file has yet, while its
write-ahead log holds pages (a checkpoint under way: SQLite writes page 1 first), is not
refused as truncated; the same file with no log is (CI once saw a finished run's store refused
as "truncated (147456 bytes of the 172032 its header gives)" as the runner closed it)."""

from __future__ import annotations

import sqlite3

import pytest

from agentmeter_tui.core.store.check import StoreError, check_file


def _store_cut_short(tmp_path):
    db = tmp_path / "run.db"
    conn = sqlite3.connect(db)
    conn.execute("pragma journal_mode=wal")
    conn.execute("create table t (x blob)")
    conn.executemany("insert into t values (?)", [(b"x" * 4000,) for _ in range(40)])
    conn.commit()
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()
    data = db.read_bytes()
    db.write_bytes(data[:len(data) // 2])  # the header's page count runs ahead of the file
    return db


def test_a_header_ahead_of_the_file_with_a_log_beside_it_is_a_checkpoint_under_way(tmp_path):
    db = _store_cut_short(tmp_path)
    (tmp_path / "run.db-wal").write_bytes(b"\x37\x7f\x06\x82" + b"\0" * 28)  # a log with pages to come
    assert check_file(db, create=False, write=False)


def test_the_same_file_with_no_log_is_truncated(tmp_path):
    db = _store_cut_short(tmp_path)
    with pytest.raises(StoreError, match="truncated"):
        check_file(db, create=False, write=False)
