"""Anthropic 1-hour cache writes end to end: the scripted server reports a turn's cache writes
split into `ephemeral_5m_input_tokens` and `ephemeral_1h_input_tokens`, Claude Code runs
behind the metering proxy, and the 1-hour share is kept per call (usage rows, from the proxy
and from Claude Code's own echo) and per trial, beside unchanged five classes."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.usage import TokenUsage
from tests.e2e.harness import run_scenario

pytestmark = pytest.mark.clis

SCENARIO = """
[[turns]]
text = "Writing the file."
shell = "echo hi > out.txt"
usage = { uncached_input = 1200, cached_input = 4000, cache_write = 300, cache_write_1h = 200, output = 30 }
[[turns]]
text = "Done."
usage = { uncached_input = 1300, cached_input = 4500, cache_write = 100, cache_write_1h = 100, output = 80 }
"""


def test_the_1h_share_is_kept_per_call_and_per_trial(tmp_path):
    result = run_scenario(tmp_path, "claude-code", SCENARIO, suite_extra="proxy = true",
                          instruction="Create a file out.txt containing hi.")
    row = result.row
    assert row["status"] == "passed" and row["usage_source"] == "proxy"
    assert row["cache_write_1h"] == 300 and row["cache_write"] == 400  # 200 + 100 of 300 + 100
    assert result.usage == TokenUsage.from_dict(result.served.as_dict())
    by_source: dict[str, list[int]] = {}
    for usage in result.store.db.query("select source, cache_write_1h from usage where trial_id = ? order by seq",
                                       [row["id"]]):
        by_source.setdefault(usage["source"], []).append(usage["cache_write_1h"])
    assert by_source["proxy"] == [200, 100]
    assert sum(by_source["stdout"]) == 300  # Claude Code echoes the provider's usage, split included
