"""opencode 1.18.33 end to end: the real CLI, the real runner, the scripted model server.

Through its Chat Completions provider a step's ``input`` holds the cache writes (there is no
cache-write figure), so that class is folded before comparing (``merged_classes``); reasoning
is reported apart and compared as it is. The adapter names the session (``--title``), which
skips opencode's title-generation call: without it that call (no tools, served as a side
call) would be billed but never reported, and the served and reported totals would differ.
"""

from __future__ import annotations

import pytest

from tests.e2e import cases

CLI = "opencode"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.WRITE_FILE, "write-file", turns=2, tool_calls=1,
                               instruction="Create out.txt containing hi.", test_sh=cases.CHECK_FILE)
    assert [c[0] for c in cases.served_calls(result)] == ["200", "200"]  # no title call
    assert result.usage.reasoning == 45  # reported apart from output
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(cases.kinds(result))
    # Its own per-step cost, from the snapshot prices we configured: cache writes are billed as input.
    assert result.row["cost_actual_usd"] == pytest.approx((2800 * 3 + 8500 * 0.3 + 155 * 15) / 1e6)


def test_cache_heavy(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.CACHE_HEAVY, "cache-heavy", turns=3, tool_calls=2)
    assert result.usage.cached_input == 18_800


def test_reasoning(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.REASONING, "reasoning", turns=2, tool_calls=1,
                               test_sh=cases.CHECK_ANSWER)
    assert result.usage.reasoning == 750 and result.usage.output == 35
    assert "reasoning" in cases.kinds(result)


def test_http_400_is_errored(tmp_path):
    result = cases.run_error_400(tmp_path, CLI)
    assert "HTTP 400" in result.row["reason"]


def test_runaway_stopped_by_token_budget(tmp_path):
    # opencode ignores SIGINT/SIGTERM in some states: the kill ladder's SIGKILL ends it.
    cases.run_runaway(tmp_path, CLI)
