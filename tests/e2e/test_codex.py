"""Codex CLI 0.169.0 end to end: the real CLI, the real runner, the scripted model server.

Codex reports all five classes (input inclusive of cache reads and writes, output inclusive
of reasoning), but on stdout only as the thread total in ``turn.completed``. The runner reads
its rollout file while it runs: that gives per-call usage (the token budget needs it), the
number of model calls, and, after the kill, the usage that stdout never printed.
"""

from __future__ import annotations

import pytest

from tests.e2e import cases

CLI = "codex"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    # turns: from the rollout file, stdout never says
    result = cases.run_passing(tmp_path, CLI, cases.WRITE_FILE, "write-file", turns=2, tool_calls=1,
                               instruction="Create out.txt containing hi.", test_sh=cases.CHECK_FILE)
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(cases.kinds(result))
    assert result.row["cost_actual_usd"] is None and result.row["usage_source"] == "stdout"


def test_cache_heavy(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.CACHE_HEAVY, "cache-heavy", turns=3, tool_calls=2)
    assert result.usage.cache_write == 9_800 and result.usage.cached_input == 18_800


def test_reasoning(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.REASONING, "reasoning", turns=2, tool_calls=1,
                               test_sh=cases.CHECK_ANSWER)
    assert result.usage.reasoning == 750 and result.usage.output == 35


def test_http_400_is_errored(tmp_path):
    result = cases.run_error_400(tmp_path, CLI)
    # turn.failed carries the provider's error body, not the HTTP status.
    assert "scripted invalid request" in result.row["reason"]


def test_runaway_stopped_by_token_budget(tmp_path):
    result = cases.run_runaway(tmp_path, CLI)
    assert "usage-recovered" in (result.row["flags"] or "")  # no turn.completed: the rollout had it
