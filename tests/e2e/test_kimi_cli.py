"""Kimi CLI 1.51.0 end to end: the real CLI, the real runner, the scripted model server.

Kimi prints no usage on stdout: every token comes from its wire log
(``~/.kimi/sessions/*/*/wire.jsonl``), which the runner reads while it runs (so a token
budget can stop it) and after it ends. Its ``input_other`` holds the cache writes and its
``output`` the reasoning, so those classes are folded before comparing (``merged_classes``).
"""

from __future__ import annotations

import pytest

from tests.e2e import cases
from tests.e2e.harness import run_scenario

CLI = "kimi-cli"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.WRITE_FILE, instruction="Create out.txt containing hi.",
                          test_sh=cases.CHECK_FILE, suite_extra=cases.KEEP)
    assert result.row["status"] == "passed", (result.row["reason"], result.row["verifier_output"])
    cases.assert_classes_match(result, CLI)
    assert result.row["turns"] == 2 and result.row["tool_calls"] == 1
    assert result.row["usage_source"] == "session"  # nothing on stdout
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(cases.kinds(result))
    cases.save_stream(result, CLI, "write-file")


def test_cache_heavy(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.CACHE_HEAVY, suite_extra=cases.KEEP)
    assert result.row["status"] == "passed", result.row["reason"]
    cases.assert_classes_match(result, CLI)
    assert result.usage.cached_input == 18_800 and result.row["turns"] == 3
    cases.save_stream(result, CLI, "cache-heavy")


def test_reasoning(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.REASONING, test_sh=cases.CHECK_ANSWER, suite_extra=cases.KEEP)
    assert result.row["status"] == "passed", result.row["reason"]
    cases.assert_classes_match(result, CLI)
    assert "reasoning" in cases.kinds(result)  # the reasoning text is on stdout, its tokens are not split
    cases.save_stream(result, CLI, "reasoning")


def test_http_400_is_errored(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.ERROR_400, suite_extra=cases.KEEP)
    assert result.row["status"] == "errored", result.row["reason"]
    # Plain text, wrapped over lines, is all Kimi says; the reason is the whole message.
    assert "Error code: 400" in result.row["reason"] and "invalid_request_error" in result.row["reason"]
    cases.save_stream(result, CLI, "error-400")


def test_runaway_stopped_by_token_budget(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.LOOP, budget=f"wall_seconds = 180\ntokens = {cases.LOOP_BUDGET}",
                          suite_extra=cases.KEEP)
    cases.assert_runaway_stopped(result, CLI)
    cases.save_stream(result, CLI, "loop-killed")
