"""Gemini CLI 0.61.0 end to end: the real CLI, the real runner, the scripted model server.

The Gemini API has no cache-write count: writes arrive inside the prompt count, so the
adapter's ``merged_classes`` folds them into uncached input and so do the comparisons.
Reasoning is derived from ``result.stats`` (total - prompt - candidates). stdout has no
per-call usage; the runner reads the chat file while the CLI runs.
"""

from __future__ import annotations

import pytest

from tests.e2e import cases
from tests.e2e.harness import run_scenario

CLI = "gemini-cli"
KEEP = "keep_workspaces = true"  # the session files, for the saved fixtures
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.WRITE_FILE, instruction="Create out.txt containing hi.",
                          test_sh=cases.CHECK_FILE, suite_extra=KEEP)
    assert result.row["status"] == "passed", (result.row["reason"], result.row["verifier_output"])
    cases.assert_classes_match(result, CLI)
    assert result.row["turns"] == 2 and result.row["tool_calls"] == 1  # turns: from the chat file
    assert {"tool_call", "tool_result", "assistant", "usage"} <= set(cases.kinds(result))
    # The answer arrives as streamed pieces, one event each.
    assert "Done: out.txt contains hi." in "".join(row[4] for row in result.events("assistant"))
    assert result.row["cost_actual_usd"] is None
    cases.save_stream(result, CLI, "write-file")


def test_cache_heavy(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.CACHE_HEAVY, suite_extra=KEEP)
    assert result.row["status"] == "passed", result.row["reason"]
    cases.assert_classes_match(result, CLI)
    assert result.usage.cached_input == 18_800 and result.usage.uncached_input == 360 + 9_800
    assert result.row["turns"] == 3 and result.row["tool_calls"] == 2
    cases.save_stream(result, CLI, "cache-heavy")


def test_reasoning(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.REASONING, test_sh=cases.CHECK_ANSWER, suite_extra=KEEP)
    assert result.row["status"] == "passed", result.row["reason"]
    cases.assert_classes_match(result, CLI)
    assert result.usage.reasoning == 750 and result.usage.output == 35
    cases.save_stream(result, CLI, "reasoning")


def test_http_400_is_errored_whatever_the_exit_code(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.ERROR_400, suite_extra=KEEP)
    assert result.row["exit_code"] == 144  # 400 mod 256; not one of its documented codes
    assert result.row["status"] == "errored" and "400" in result.row["reason"]
    cases.save_stream(result, CLI, "error-400")


def test_runaway_stopped_by_token_budget(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.LOOP, budget=f"wall_seconds = 180\ntokens = {cases.LOOP_BUDGET}",
                          suite_extra=KEEP)
    cases.assert_runaway_stopped(result, CLI)
    assert "usage-recovered" in (result.row["flags"] or "")  # killed: no result record, the chat file had it
    cases.save_stream(result, CLI, "loop-killed")
