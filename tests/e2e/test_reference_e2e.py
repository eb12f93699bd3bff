"""The reference agent through the e2e harness: the same scenarios every real CLI must pass."""

from __future__ import annotations

from tests.e2e.harness import run_scenario

WRITE_FILE = """
[[turns]]
shell = "echo hi > out.txt"
usage = { uncached_input = 1200, cached_input = 4000, cache_write = 300, output = 30, reasoning = 20 }
[[turns]]
text = "Wrote out.txt."
usage = { uncached_input = 200, cached_input = 5000, output = 10 }
"""
CHECK_FILE = '#!/bin/sh\ngrep -qx hi "$AGENTMETER_WORKSPACE/out.txt"\n'


def test_tool_call_writes_a_file_and_classes_match(tmp_path):
    result = run_scenario(tmp_path, "reference", WRITE_FILE, test_sh=CHECK_FILE)
    assert result.row["status"] == "passed"
    assert result.usage == result.served
    assert result.row["tool_calls"] == 1 and result.row["turns"] == 2


def test_http_400_ends_errored(tmp_path):
    scenario = '[[turns]]\nerror = { status = 400, message = "scripted invalid request" }\n'
    result = run_scenario(tmp_path, "reference", scenario)
    assert result.row["status"] == "errored"
    assert "400" in result.row["reason"]
