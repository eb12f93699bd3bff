"""Claude Code 2.1.197 end to end: the real CLI, the real runner, the scripted model server.

Claude Code cannot tell reasoning from output (thinking is inside ``output_tokens``): its
adapter says so in ``merged_classes`` and the comparisons fold the served figures the same
way. Its per-message stream usage is wrong for output; the ``result`` record corrects it,
and after the budget kill (SIGINT first) it still prints ``result`` with the usage and cost
of every completed call (or, killed mid-stream, exits 0 without it: the session file has it).
"""

from __future__ import annotations

import pytest

from tests.e2e import cases
from tests.e2e.harness import run_scenario

CLI = "claude-code"
KEEP = "keep_workspaces = true"  # the session files, for the saved fixtures
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.WRITE_FILE, instruction="Create out.txt containing hi.",
                          test_sh=cases.CHECK_FILE, suite_extra=KEEP)
    assert result.row["status"] == "passed", (result.row["reason"], result.row["verifier_output"])
    cases.assert_classes_match(result, CLI)
    assert result.row["turns"] == 2 and result.row["tool_calls"] == 1
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(cases.kinds(result))
    (call,) = result.events("tool_call")
    assert call[4] == "echo hi > out.txt"
    # Its own cost, from Anthropic's table whatever the model: kept as the actual figure only,
    # since the provider here is not Anthropic.
    assert result.row["cost_actual_usd"] > 0 and result.row["cost_actual_source"] == "claude-code:reported"
    assert result.row["cost_source"] == "snapshot"
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
    assert result.usage.output == 15 + 600 + 20 + 150  # thinking inside output, as Anthropic reports it
    assert cases.kinds(result).count("reasoning") >= 2  # the thinking text is still shown
    cases.save_stream(result, CLI, "reasoning")


def test_http_400_is_errored(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.ERROR_400, suite_extra=KEEP)
    # result/success with is_error: true: the subtype alone would say it worked.
    assert result.row["status"] == "errored" and "400" in result.row["reason"]
    assert result.row["exit_code"] == 1 and "error" in cases.kinds(result)
    cases.save_stream(result, CLI, "error-400")


def test_runaway_stopped_by_token_budget(tmp_path):
    result = run_scenario(tmp_path, CLI, cases.LOOP, budget=f"wall_seconds = 180\ntokens = {cases.LOOP_BUDGET}",
                          suite_extra=KEEP)
    # Killed during a tool, SIGINT makes it print result with every call's usage; killed while
    # a call streams, it may exit 0 with no result, and the session file has the true output
    # counts (flag usage-recovered). Either way the classes must be exact.
    cases.assert_runaway_stopped(result, CLI)
    cases.save_stream(result, CLI, "loop-killed")
