"""Qwen Code 0.15.10 end to end: the real CLI, the real runner, the scripted model server.

Qwen's stream reports the whole prompt as ``input_tokens`` (cache writes inside it, no
cache-write figure) and folds reasoning into ``output_tokens``: its adapter says so in
``merged_classes`` and the comparisons fold the served figures the same way.
"""

from __future__ import annotations

import pytest

from tests.e2e import cases

CLI = "qwen-code"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.WRITE_FILE, "write-file", turns=2, tool_calls=1,
                               instruction="Create out.txt containing hi.", test_sh=cases.CHECK_FILE)
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(cases.kinds(result))
    assert result.row["cost_actual_usd"] is None and result.row["usage_source"] == "stdout"


def test_cache_heavy(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.CACHE_HEAVY, "cache-heavy", turns=3, tool_calls=2)
    # 9,800 cache writes served: Qwen counts them as (uncached) input.
    assert result.usage.cached_input == 18_800 and result.usage.uncached_input == 360 + 9_800


def test_reasoning(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.REASONING, "reasoning", turns=2, tool_calls=1,
                               test_sh=cases.CHECK_ANSWER)
    assert result.usage.output == 15 + 600 + 20 + 150  # reasoning inside output, as Qwen reports it
    assert "reasoning" in cases.kinds(result)  # the reasoning text is printed, its tokens are not


def test_http_400_is_errored_despite_exit_0(tmp_path):
    result = cases.run_error_400(tmp_path, CLI)
    # Qwen prints result/success, is_error false, and exits 0: only the text shows the failure.
    assert result.row["exit_code"] == 0 and "400" in result.row["reason"]


def test_runaway_stopped_by_token_budget(tmp_path):
    # SIGINT first: Qwen (without its relauncher) cancels the tool and exits 130, no result record.
    cases.run_runaway(tmp_path, CLI)
