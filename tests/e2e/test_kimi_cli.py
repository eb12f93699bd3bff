"""Kimi CLI 1.51.0 end to end: the real CLI, the real runner, the scripted model server.

Kimi prints no usage on stdout: every token comes from its wire log
(``~/.kimi/sessions/*/*/wire.jsonl``), which the runner reads while it runs (so a token
budget can stop it) and after it ends. Its ``input_other`` holds the cache writes and its
``output`` the reasoning, so those classes are folded before comparing (``merged_classes``).
"""

from __future__ import annotations

import pytest

from tests.e2e import cases

CLI = "kimi-cli"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_shell_call_writes_a_file(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.WRITE_FILE, "write-file", turns=2, tool_calls=1,
                               instruction="Create out.txt containing hi.", test_sh=cases.CHECK_FILE)
    assert result.row["usage_source"] == "session"  # nothing on stdout
    assert {"tool_call", "tool_result", "assistant", "reasoning", "usage"} <= set(cases.kinds(result))


def test_cache_heavy(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.CACHE_HEAVY, "cache-heavy", turns=3, tool_calls=2)
    assert result.usage.cached_input == 18_800


def test_reasoning(tmp_path):
    result = cases.run_passing(tmp_path, CLI, cases.REASONING, "reasoning", turns=2, tool_calls=1,
                               test_sh=cases.CHECK_ANSWER)
    assert "reasoning" in cases.kinds(result)  # the reasoning text is on stdout, its tokens are not split


def test_http_400_is_errored(tmp_path):
    result = cases.run_error_400(tmp_path, CLI)
    # Plain text, wrapped over lines, is all Kimi says; the reason is the whole message.
    assert "Error code: 400" in result.row["reason"] and "invalid_request_error" in result.row["reason"]


def test_runaway_stopped_by_token_budget(tmp_path):
    result = cases.run_runaway(tmp_path, CLI)
    assert result.row["usage_source"] == "session"  # read from the wire log while it ran
