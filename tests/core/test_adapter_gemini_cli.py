"""The Gemini CLI adapter's parser, chat-file recovery and launch, on lines shaped like its
real stream-json and chat files (``tests/fixtures/streams/gemini-cli/`` has real ones)."""

from __future__ import annotations

import json

from agentmeter_tui.core.harnesses import LaunchContext, get_adapter
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import EventKind

ADAPTER = get_adapter("gemini-cli")


def line(obj: dict) -> bytes:
    return json.dumps(obj).encode()


def feed(parser, lines: list[bytes]) -> list:
    return [event for raw in lines for event in parser.feed("stdout", raw)]


STATS = {"total_tokens": 11455, "input_tokens": 11300, "output_tokens": 110, "cached": 8500, "input": 2800,
         "duration_ms": 681, "tool_calls": 1}


def test_stream_and_stats():
    parser = ADAPTER.new_parser()
    events = feed(parser, [
        line({"type": "init", "session_id": "s", "model": "gemini-2.5-pro"}),
        line({"type": "message", "role": "user", "content": "Create out.txt"}),
        line({"type": "message", "role": "assistant", "content": "Writin", "delta": True}),
        line({"type": "message", "role": "assistant", "content": "g the file.", "delta": True}),
        line({"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t1",
              "parameters": {"command": "echo hi > out.txt"}}),
        line({"type": "tool_result", "tool_id": "t1", "status": "success", "output": ""}),
        line({"type": "result", "status": "success", "stats": STATS}),
    ])
    assert "".join(e.text for e in events if e.kind == EventKind.ASSISTANT) == "Writing the file."
    (call,) = [e for e in events if e.kind == EventKind.TOOL_CALL]
    assert call.text == "echo hi > out.txt" and call.tool_name == "run_shell_command"
    # Prompt includes the cache (and the cache writes, which Gemini cannot report apart);
    # thoughts are total - prompt - candidates.
    assert parser.usage == TokenUsage(2800, 8500, 0, 110, 45) and parser.final_seen
    assert parser.outcome(0, killed=False).errored is False


def test_error_result_is_an_error_whatever_the_exit_code():
    parser = ADAPTER.new_parser()
    feed(parser, [line({"type": "result", "status": "error",
                        "error": {"type": "unknown", "message": '[API Error: {"error":{"code":400}}]'},
                        "stats": {**STATS, "total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0}})])
    for code in (144, 0, 1):
        outcome = parser.outcome(code, killed=False)
        assert outcome.errored and "400" in outcome.error


def test_exit_0_without_result_is_an_error_unless_killed():
    parser = ADAPTER.new_parser()
    feed(parser, [line({"type": "init", "model": "m"}),
                  line({"type": "tool_result", "tool_id": "t", "status": "error", "output": "boom"})])
    assert parser.outcome(0, killed=False).errored  # a signal it took for ours still exits 0
    assert not parser.outcome(0, killed=True).errored


def gemini_record(record_id: str, tokens: dict) -> bytes:
    return line({"id": record_id, "type": "gemini", "content": "", "tokens": tokens, "model": "m"})


def test_chat_file_recovery_dedups_by_id():
    call1 = {"input": 5500, "output": 30, "cached": 4000, "thoughts": 20, "tool": 0, "total": 5550}
    call2 = {"input": 5800, "output": 80, "cached": 4500, "thoughts": 25, "tool": 0, "total": 5905}
    chat = b"\n".join([
        line({"sessionId": "s", "kind": "main"}),
        line({"$set": {"messages": [{"id": "u", "type": "user", "content": []}]}}),
        gemini_record("a", call1), line({"$set": {"lastUpdated": "x"}}), gemini_record("a", call1),
        gemini_record("b", call2),
    ])
    recovery = ADAPTER.recover({".gemini/tmp/w/chats/session-1.jsonl": chat})
    assert recovery.usage == TokenUsage(2800, 8500, 0, 110, 45) and recovery.turns == 2


def test_chat_file_variants():
    # Records inside $set.messages, an input that already excludes the cache, tool-use prompt tokens.
    exclusive = {"input": 1500, "output": 30, "cached": 4000, "thoughts": 20, "tool": 10, "total": 5560}
    chat = line({"$set": {"messages": [{"id": "a", "type": "gemini", "tokens": exclusive}]}})
    recovery = ADAPTER.recover({"session.jsonl": chat})
    assert recovery.usage == TokenUsage(1510, 4000, 0, 30, 20) and recovery.turns == 1
    assert ADAPTER.recover({"session.jsonl": line({"type": "user", "tokens": {}})}) is None


def test_launch():
    ctx = LaunchContext(model_name="gemini-2.5-pro", instruction="-p looks like a flag", workspace="/w", home="/h",
                        base_url="http://127.0.0.1:9", api_key="k", clis_root="/c")
    command = ADAPTER.command(ctx)
    assert command[0] == "/c/node_modules/.bin/gemini" and command[-1] == "--prompt=-p looks like a flag"
    assert command[command.index("--output-format") + 1] == "stream-json"
    env = ADAPTER.environment(ctx)
    assert env["GEMINI_CLI_NO_RELAUNCH"] == "true" and env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9"
    settings = json.loads(ADAPTER.home_files(ctx)[".gemini/settings.json"])
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["telemetry"]["enabled"] is False and settings["privacy"]["usageStatisticsEnabled"] is False
    assert ADAPTER.merged_classes == {"cache_write": "uncached_input"}
