"""The trial chunks the site's workers take: every trial once, in order, the last ones smaller."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.reporting.site import pages


@pytest.mark.parametrize("count", [1, 200, 300, 1093, 9807])
def test_chunks_hold_every_trial_once_in_order_and_end_small(count):
    trials = [{"id": n} for n in range(count)]
    chunks = pages._chunks(trials, 2)
    assert [t for chunk in chunks for t in chunk] == trials
    assert max(len(c) for c in chunks) <= pages.CHUNK
    assert all(len(c) <= pages.CHUNK // 4 for c in chunks[-8:])  # no big chunk at the end
