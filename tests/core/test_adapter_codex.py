"""The Codex adapter's parser, rollout recovery and launch, on lines shaped like its real
``exec --json`` output and rollout files (``tests/fixtures/streams/codex/`` has real ones)."""

from __future__ import annotations

import json
import tomllib

from agentmeter_tui.core.harnesses import LaunchContext, Recovery, get_adapter
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import EventKind

ADAPTER = get_adapter("codex")


def line(obj: dict) -> bytes:
    return json.dumps(obj).encode()


def feed(parser, lines: list[bytes]) -> list:
    return [event for raw in lines for event in parser.feed("stdout", raw)]


def usage(inp: int, cached: int, write: int, out: int, reasoning: int) -> dict:
    return {"input_tokens": inp, "cached_input_tokens": cached, "cache_write_input_tokens": write,
            "output_tokens": out, "reasoning_output_tokens": reasoning}


def turn_completed(u: dict) -> bytes:
    return line({"type": "turn.completed", "usage": u})


def test_thread_total_is_normalized_and_never_added_twice():
    parser = ADAPTER.new_parser()
    events = feed(parser, [
        line({"type": "thread.started", "thread_id": "t1"}), line({"type": "turn.started"}),
        line({"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "think"}}),
        line({"type": "item.started", "item": {"id": "i1", "type": "command_execution",
                                               "command": "/bin/bash -lc 'echo hi > out.txt'", "status": "in_progress"}}),
        line({"type": "item.completed", "item": {"id": "i1", "type": "command_execution", "exit_code": 0,
                                                 "aggregated_output": "", "status": "completed"}}),
        line({"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": "Done."}}),
        turn_completed(usage(11300, 8500, 300, 155, 45)),
    ])
    # Input includes cache reads and writes; output includes reasoning.
    assert parser.usage == TokenUsage(2500, 8500, 300, 110, 45) and parser.final_seen
    assert [e.kind for e in events].count(EventKind.TOOL_CALL) == 1 and parser.tool_calls == 1
    # A second turn of the same thread (exec resume): the figure is the thread's running total.
    feed(parser, [line({"type": "turn.started"}), turn_completed(usage(17000, 12000, 300, 200, 60))])
    assert parser.usage == TokenUsage(4700, 12000, 300, 140, 60)
    assert parser.outcome(0, killed=False).errored is False


def test_turn_failed_is_an_error_and_retry_notices_are_not():
    parser = ADAPTER.new_parser()
    body = json.dumps({"error": {"message": "scripted invalid request", "type": "invalid_request_error"}})
    events = feed(parser, [line({"type": "error", "message": "Reconnecting... 1/3"}),
                           line({"type": "error", "message": body}),
                           line({"type": "turn.failed", "error": {"message": body}})])
    assert [e.kind for e in events] == [EventKind.ERROR] * 3
    outcome = parser.outcome(1, killed=False)
    assert outcome.errored and outcome.error == "invalid_request_error: scripted invalid request"

    recovered = ADAPTER.new_parser()
    feed(recovered, [line({"type": "error", "message": "Reconnecting... 1/3"}),
                     line({"type": "item.completed", "item": {"type": "error", "message": "Model metadata for `x` "
                                                                                         "not found"}}),
                     turn_completed(usage(100, 0, 0, 20, 0))])
    assert recovered.outcome(0, killed=False).errored is False  # warnings it carried on after


def test_no_turn_completed_is_an_error_unless_killed():
    parser = ADAPTER.new_parser()
    feed(parser, [line({"type": "turn.started"})])
    assert parser.outcome(0, killed=False).errored
    assert not parser.outcome(1, killed=True).errored


def record(response_id: str, u: dict) -> bytes:
    return line({"type": "token_usage_record", "payload": {"response_id": response_id, "usage": u}})


def token_count(total: dict) -> bytes:
    return line({"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": total}}})


def test_rollout_recovery_per_response():
    rollout = b"\n".join([
        line({"type": "session_meta", "payload": {"id": "t1"}}),
        record("r1", usage(5500, 4000, 300, 50, 20)), token_count(usage(5500, 4000, 300, 50, 20)),
        record("r1", usage(5500, 4000, 300, 50, 20)),  # written again: one call
        token_count(usage(5500, 4000, 300, 50, 20)),  # re-emitted unchanged total
        record("r2", usage(5800, 4500, 0, 105, 25)), token_count(usage(11300, 8500, 300, 155, 45)),
    ])
    recovery = ADAPTER.recover({".codex/sessions/2026/11/26/rollout-x.jsonl": rollout})
    assert recovery.usage == TokenUsage(2500, 8500, 300, 110, 45) and recovery.turns == 2


def test_rollout_recovery_from_totals_alone():
    rollout = b"\n".join([token_count(usage(5500, 4000, 300, 50, 20)), token_count(usage(5500, 4000, 300, 50, 20)),
                          token_count(usage(11300, 8500, 300, 155, 45))])
    recovery = ADAPTER.recover({"rollout-x.jsonl": rollout})
    assert recovery.usage == TokenUsage(2500, 8500, 300, 110, 45) and recovery.turns == 2
    assert ADAPTER.recover({"rollout-x.jsonl": line({"type": "session_meta"})}) is None


def test_live_session_reads_and_the_final_total_do_not_double_count():
    parser = ADAPTER.new_parser()
    first_call = Recovery(TokenUsage(1200, 4000, 300, 30, 20), 1, "session:r")
    event = parser.absorb(first_call)
    assert event.usage == first_call.usage and event.turns == 1
    both = Recovery(TokenUsage(2500, 8500, 300, 110, 45), 2, "session:r")
    assert parser.absorb(both).usage == TokenUsage(1300, 4500, 0, 80, 25)
    assert feed(parser, [turn_completed(usage(11300, 8500, 300, 155, 45))])[0].kind == EventKind.SYSTEM
    assert parser.usage == both.usage and parser.turns == 2


def test_launch_and_config():
    ctx = LaunchContext(model_name="gpt-5.5", instruction="-x", workspace="/w", home="/h",
                        base_url="http://127.0.0.1:9", api_key="secret", clis_root="/c")
    command = ADAPTER.command(ctx)
    assert command[:3] == ["/c/node_modules/.bin/codex", "exec", "--json"] and command[-2:] == ["--", "-x"]
    env = ADAPTER.environment(ctx)
    assert env["CODEX_HOME"] == "/h/.codex"
    config = tomllib.loads(ADAPTER.home_files(ctx)[".codex/config.toml"].decode())
    provider = config["model_providers"][config["model_provider"]]
    assert config["model"] == "gpt-5.5" and config["check_for_update_on_startup"] is False
    assert provider["base_url"] == "http://127.0.0.1:9/v1" and provider["wire_api"] == "responses"
    assert env[provider["env_key"]] == "secret"  # the key is in the environment, not in the file
    assert "secret" not in ADAPTER.home_files(ctx)[".codex/config.toml"].decode()
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 3
    assert config["analytics"]["enabled"] is False
    assert ADAPTER.merged_classes == {} and ADAPTER.live_session_poll
