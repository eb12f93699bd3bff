"""Gemini CLI 0.61.0 end to end: the real CLI, the real runner, the scripted model server.

The Gemini API has no cache-write count: writes arrive inside the prompt count, so the
adapter's ``merged_classes`` folds them into uncached input and so do the comparisons.
Reasoning is derived from ``result.stats`` (total - prompt - candidates). stdout has no
per-call usage; the runner reads the chat file while the CLI runs.
"""

from __future__ import annotations

import pytest

from tests.e2e import cases

CLI = "gemini-cli"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    # turns: from the chat file, stdout never says
    result = cases.run_passing(tmp_path, CLI, cases.WRITE_FILE, "write-file", turns=2, tool_calls=1,
                               instruction="Create out.txt containing hi.", test_sh=cases.CHECK_FILE)
    assert {"tool_call", "tool_result", "assistant", "usage"} <= set(cases.kinds(result))
    # The answer arrives as streamed pieces, one event each.
    assert "Done: out.txt contains hi." in "".join(row[4] for row in result.events("assistant"))
    assert result.row["cost_actual_usd"] is None


def test_cache_heavy(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.CACHE_HEAVY, "cache-heavy", turns=3, tool_calls=2)
    assert result.usage.cached_input == 18_800 and result.usage.uncached_input == 360 + 9_800


def test_reasoning(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.REASONING, "reasoning", turns=2, tool_calls=1,
                               test_sh=cases.CHECK_ANSWER)
    assert result.usage.reasoning == 750 and result.usage.output == 35


def test_http_400_is_errored_whatever_the_exit_code(tmp_path):
    result = cases.run_error_400(tmp_path, CLI)
    assert result.row["exit_code"] == 144  # 400 mod 256; not one of its documented codes
    assert "400" in result.row["reason"]


def test_runaway_stopped_by_token_budget(tmp_path):
    result = cases.run_runaway(tmp_path, CLI)
    assert "usage-recovered" in (result.row["flags"] or "")  # killed: no result record, the chat file had it
