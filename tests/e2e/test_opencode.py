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
from tests.e2e.harness import run_scenario

CLI = "opencode"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.WRITE_FILE, instruction="Create out.txt containing hi.",
                          test_sh=cases.CHECK_FILE)
    assert result.row["status"] == "passed", (result.row["reason"], result.row["verifier_output"])
    assert [c[0] for c in cases.served_calls(result)] == ["200", "200"]  # no title call
    cases.assert_classes_match(result, CLI)
    assert result.usage.reasoning == 45  # reported apart from output
    assert result.row["turns"] == 2 and result.row["tool_calls"] == 1
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(cases.kinds(result))
    # Its own per-step cost, from the snapshot prices we configured: cache writes are billed as input.
    assert result.row["cost_actual_usd"] == pytest.approx((2800 * 3 + 8500 * 0.3 + 155 * 15) / 1e6)
    cases.save_stream(result, CLI, "write-file")


def test_cache_heavy(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.CACHE_HEAVY)
    assert result.row["status"] == "passed", result.row["reason"]
    cases.assert_classes_match(result, CLI)
    assert result.usage.cached_input == 18_800 and result.row["turns"] == 3
    cases.save_stream(result, CLI, "cache-heavy")


def test_reasoning(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.REASONING, test_sh=cases.CHECK_ANSWER)
    assert result.row["status"] == "passed", result.row["reason"]
    cases.assert_classes_match(result, CLI)
    assert result.usage.reasoning == 750 and result.usage.output == 35
    assert "reasoning" in cases.kinds(result)
    cases.save_stream(result, CLI, "reasoning")


def test_http_400_is_errored(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.ERROR_400)
    assert result.row["status"] == "errored" and "400" in result.row["reason"], result.row["reason"]
    assert "error" in cases.kinds(result)
    cases.save_stream(result, CLI, "error-400")


def test_runaway_stopped_by_token_budget(tmp_path):
    # opencode ignores SIGINT/SIGTERM in some states: the kill ladder's SIGKILL ends it.
    result = run_scenario(tmp_path, CLI, cases.LOOP, budget=f"wall_seconds = 180\ntokens = {cases.LOOP_BUDGET}")
    cases.assert_runaway_stopped(result, CLI)
    cases.save_stream(result, CLI, "loop-killed")
