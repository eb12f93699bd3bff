"""Qwen Code 0.15.10 end to end: the real CLI, the real runner, the scripted model server.

Qwen's stream reports the whole prompt as ``input_tokens`` (cache writes inside it, no
cache-write figure) and folds reasoning into ``output_tokens``: its adapter says so in
``merged_classes`` and the comparisons fold the served figures the same way.
"""

from __future__ import annotations

import pytest

from tests.e2e import cases
from tests.e2e.harness import run_scenario

CLI = "qwen-code"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.WRITE_FILE, instruction="Create out.txt containing hi.",
                          test_sh=cases.CHECK_FILE)
    assert result.row["status"] == "passed", (result.row["reason"], result.row["verifier_output"])
    cases.assert_classes_match(result, CLI)
    assert result.row["turns"] == 2 and result.row["tool_calls"] == 1
    kinds = cases.kinds(result)
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(kinds)
    cases.save_stream(result, CLI, "write-file")


def test_cache_heavy(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.CACHE_HEAVY)
    assert result.row["status"] == "passed", result.row["reason"]
    # 9,800 cache writes served: Qwen counts them as (uncached) input.
    cases.assert_classes_match(result, CLI)
    assert result.usage.cached_input == 18_800 and result.row["turns"] == 3
    cases.save_stream(result, CLI, "cache-heavy")


def test_reasoning(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.REASONING, test_sh=cases.CHECK_ANSWER)
    assert result.row["status"] == "passed", result.row["reason"]
    cases.assert_classes_match(result, CLI)
    assert result.usage.output == 15 + 600 + 20 + 150  # reasoning inside output, as Qwen reports it
    assert "reasoning" in cases.kinds(result)
    cases.save_stream(result, CLI, "reasoning")


def test_http_400_is_errored_despite_exit_0(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.ERROR_400)
    # Qwen prints result/success, is_error false, and exits 0: only the text shows the failure.
    assert result.row["exit_code"] == 0
    assert result.row["status"] == "errored" and "400" in result.row["reason"]
    assert "error" in cases.kinds(result)
    cases.save_stream(result, CLI, "error-400")


def test_runaway_stopped_by_token_budget(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.LOOP, budget=f"wall_seconds = 180\ntokens = {cases.LOOP_BUDGET}",
                          suite_extra=cases.KEEP)
    cases.assert_runaway_stopped(result, CLI)
    cases.save_stream(result, CLI, "loop-killed")  # with the chat file's usage lines (kept HOME)
