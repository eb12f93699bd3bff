"""Codex CLI 0.169.0 end to end: the real CLI, the real runner, the scripted model server.

Codex reports all five classes (input inclusive of cache reads and writes, output inclusive
of reasoning), but on stdout only as the thread total in ``turn.completed``. The runner reads
its rollout file while it runs: that gives per-call usage (the token budget needs it), the
number of model calls, and, after the kill, the usage that stdout never printed.
"""

from __future__ import annotations

import pytest

from tests.e2e import cases
from tests.e2e.harness import run_scenario

CLI = "codex"
KEEP = "keep_workspaces = true"  # the session files, for the saved fixtures
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.WRITE_FILE, instruction="Create out.txt containing hi.",
                          test_sh=cases.CHECK_FILE, suite_extra=KEEP)
    assert result.row["status"] == "passed", (result.row["reason"], result.row["verifier_output"])
    cases.assert_classes_match(result, CLI)
    assert result.row["turns"] == 2 and result.row["tool_calls"] == 1  # turns: from the rollout file
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(cases.kinds(result))
    assert result.row["cost_actual_usd"] is None and result.row["usage_source"] == "stdout"
    cases.save_stream(result, CLI, "write-file")


def test_cache_heavy(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.CACHE_HEAVY, suite_extra=KEEP)
    assert result.row["status"] == "passed", result.row["reason"]
    cases.assert_classes_match(result, CLI)
    assert result.usage.cache_write == 9_800 and result.usage.cached_input == 18_800
    assert result.row["turns"] == 3 and result.row["tool_calls"] == 2
    cases.save_stream(result, CLI, "cache-heavy")


def test_reasoning(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.REASONING, test_sh=cases.CHECK_ANSWER, suite_extra=KEEP)
    assert result.row["status"] == "passed", result.row["reason"]
    cases.assert_classes_match(result, CLI)
    assert result.usage.reasoning == 750 and result.usage.output == 35
    cases.save_stream(result, CLI, "reasoning")


def test_http_400_is_errored(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.ERROR_400, suite_extra=KEEP)
    # turn.failed carries the provider's error body, not the HTTP status.
    assert result.row["status"] == "errored" and "scripted invalid request" in result.row["reason"]
    assert "error" in cases.kinds(result)
    cases.save_stream(result, CLI, "error-400")


def test_runaway_stopped_by_token_budget(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.LOOP, budget=f"wall_seconds = 180\ntokens = {cases.LOOP_BUDGET}",
                          suite_extra=KEEP)
    cases.assert_runaway_stopped(result, CLI)
    assert "usage-recovered" in (result.row["flags"] or "")  # no turn.completed: the rollout had it
    cases.save_stream(result, CLI, "loop-killed")
