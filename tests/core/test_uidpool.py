"""The local sandbox's pool of trial uids: distinct while held, a given-back uid taken again
first (its account lookup cached), and a uid another runner holds (its lock) passed by."""

from __future__ import annotations

import fcntl
import os

from agentmeter_tui.core.sandboxes import uidpool
from agentmeter_tui.core.sandboxes.uidpool import UidPool


def test_held_uids_are_distinct_and_a_given_back_one_comes_first(tmp_path):
    pool = UidPool(tmp_path / "uids")
    first, second = pool.take(), pool.take()
    assert first != second and min(first, second) >= uidpool.FIRST
    pool.give_back(first)
    misses = uidpool._has_account.cache_info().misses
    assert pool.take() == first
    assert uidpool._has_account.cache_info().misses == misses  # no new lookup for a reused uid


def test_a_uid_another_runner_holds_is_passed_by(tmp_path):
    pool = UidPool(tmp_path / "uids")
    uid = pool.take()
    pool.give_back(uid)
    other = os.open(tmp_path / "uids" / str(uid), os.O_RDWR)  # another runner's lock on it
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert pool.take() != uid
    finally:
        os.close(other)
