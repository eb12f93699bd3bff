"""Claude Code 2.1.197 end to end: the real CLI, the real runner, the scripted model server.

Claude Code cannot tell reasoning from output (thinking is inside ``output_tokens``): its
adapter says so in ``merged_classes`` and the comparisons fold the served figures the same
way. Its per-message stream usage is wrong for output; the ``result`` record corrects it.
After the budget kill (SIGINT first) it prints ``result`` with the usage and cost of every
completed call, or, killed while a call streams, exits 0 without it: the session file has it.
"""

from __future__ import annotations

import pytest

from agentmeter_tui.core.usage import TokenUsage
from tests.e2e import cases

CLI = "claude-code"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.WRITE_FILE, "write-file", turns=2, tool_calls=1,
                               instruction="Create out.txt containing hi.", test_sh=cases.CHECK_FILE)
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(cases.kinds(result))
    (call,) = result.events("tool_call")
    assert call[4] == "echo hi > out.txt"
    # Its own cost, from Anthropic's table whatever the model: kept as the actual figure only,
    # since the provider here is not Anthropic.
    assert result.row["cost_actual_usd"] > 0 and result.row["cost_actual_source"] == "claude-code:reported"
    assert result.row["cost_source"] == "snapshot"


def test_cache_heavy(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.CACHE_HEAVY, "cache-heavy", turns=3, tool_calls=2)
    assert result.usage.cache_write == 9_800 and result.usage.cached_input == 18_800


def test_reasoning(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.REASONING, "reasoning", turns=2, tool_calls=1,
                               test_sh=cases.CHECK_ANSWER)
    assert result.usage.output == 15 + 600 + 20 + 150  # thinking inside output, as Anthropic reports it
    assert cases.kinds(result).count("reasoning") >= 2  # the thinking text is still shown


def test_http_400_is_errored(tmp_path):
    result = cases.run_error_400(tmp_path, CLI)
    # result/success with is_error: true: the subtype alone would say it worked.
    assert "400" in result.row["reason"]
    assert result.row["exit_code"] == 1


def test_runaway_stopped_by_token_budget(tmp_path):
    cases.run_runaway(tmp_path, CLI)


OUTPUT_LOOP = """
description = "a runaway whose calls cost only output: stdout says 1 for each, the truth is 2,000"
[[turns]]
loop = true
shell = "echo again {call} >> loop.txt"
usage = { uncached_input = 0, output = 2000 }
"""


def test_a_token_budget_sees_the_output_before_the_result(tmp_path):
    """Until its ``result``, Claude Code's stdout counts each call's output as 1. The runner
    reads the session files while it runs (each call's final usage), so a 5,000-token budget
    stops the loop within a few calls, not at the wall clock 5,000 calls later (the old code:
    killed by ``wall_seconds``)."""
    result = cases.run_scenario(tmp_path, CLI, OUTPUT_LOOP, budget="wall_seconds = 60\ntokens = 5000",
                                suite_extra=cases.KEEP)
    assert (result.row["status"], result.row["reason"]) == ("killed", "budget:tokens")
    assert "from session:" in " ".join(row[4] for row in result.events("usage"))
    served = cases.served_calls(result)
    calls = cases.claude_final_or_announced(result, served) or [usage for _s, done, usage in served if done]
    kept = sum(calls[:result.row["turns"]], TokenUsage())
    assert result.usage == kept and result.usage.output >= 5000
