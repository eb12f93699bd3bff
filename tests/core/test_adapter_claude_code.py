"""The Claude Code adapter's parser, recovery and launch, on hand-made lines shaped like its
real stream-json (``tests/fixtures/streams/claude-code/`` has the real ones)."""

from __future__ import annotations

import json
from decimal import Decimal

from agentmeter_tui.core.harnesses import LaunchContext, get_adapter
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import EventKind
from tests.conftest import FIXTURES

ADAPTER = get_adapter("claude-code")


def line(obj: dict) -> bytes:
    return json.dumps(obj).encode()


def assistant(message_id: str, block: dict, usage: dict, model: str = "claude-sonnet-4-6", **extra) -> bytes:
    return line({"type": "assistant", "message": {"id": message_id, "model": model, "content": [block],
                                                  "usage": usage}, **extra})


CALL1 = {"input_tokens": 1200, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 300, "output_tokens": 1}
CALL2 = {"input_tokens": 1300, "cache_read_input_tokens": 4500, "cache_creation_input_tokens": 0, "output_tokens": 1}
RESULT_USAGE = {"input_tokens": 2500, "cache_read_input_tokens": 8500, "cache_creation_input_tokens": 300,
                "output_tokens": 155}


def result(usage: dict = RESULT_USAGE, **fields) -> bytes:
    return line({"type": "result", "subtype": "success", "is_error": False, "num_turns": 2,
                 "total_cost_usd": 0.0135, "usage": usage, **fields})


def feed(parser, lines: list[bytes]) -> list:
    return [event for raw in lines for event in parser.feed("stdout", raw)]


def test_repeated_message_ids_count_once_and_result_corrects_output():
    parser = ADAPTER.new_parser()
    events = feed(parser, [
        assistant("m1", {"type": "thinking", "thinking": "I should write the file."}, CALL1),
        assistant("m1", {"type": "text", "text": "Writing the file."}, CALL1),
        assistant("m1", {"type": "tool_use", "name": "Bash", "input": {"command": "echo hi > out.txt"}}, CALL1),
        line({"type": "user", "message": {"content": [{"type": "tool_result", "content": "", "is_error": False}]}}),
        assistant("m2", {"type": "text", "text": "Done."}, CALL2),
    ])
    # Live estimate: each message's input once, with the wrong output count of 1.
    assert parser.usage == TokenUsage(2500, 8500, 300, 2, 0) and parser.turns == 2
    assert [e.kind for e in events].count(EventKind.USAGE) == 2
    (call,) = [e for e in events if e.kind == EventKind.TOOL_CALL]
    assert call.text == "echo hi > out.txt" and call.tool_key == 'Bash:{"command":"echo hi > out.txt"}'
    final = feed(parser, [result()])
    (usage_event,) = [e for e in final if e.kind == EventKind.USAGE]
    assert usage_event.usage == TokenUsage(output=153) and usage_event.turns == 0  # the correction only
    assert parser.usage == TokenUsage(2500, 8500, 300, 155, 0)
    assert parser.reported_cost_usd == Decimal("0.0135") and usage_event.reported_cost_usd == Decimal("0.0135")
    assert parser.outcome(0, killed=False).errored is False


def test_result_below_the_stream_sum_corrects_downwards():
    parser = ADAPTER.new_parser()
    feed(parser, [assistant("m1", {"type": "text", "text": "x"}, {**CALL1, "output_tokens": 90})])
    feed(parser, [result({"input_tokens": 1200, "cache_read_input_tokens": 4000,
                          "cache_creation_input_tokens": 300, "output_tokens": 50})])
    assert parser.usage.output == 50  # the billed total, not the sum of snapshots


def test_model_usage_covers_background_models():
    parser = ADAPTER.new_parser()
    model_usage = {"claude-sonnet-4-6": {"inputTokens": 2500, "outputTokens": 155, "cacheReadInputTokens": 8500,
                                         "cacheCreationInputTokens": 300, "costUSD": 0.0135},
                   "claude-haiku-4-5": {"inputTokens": 40, "outputTokens": 10, "cacheReadInputTokens": 0,
                                        "cacheCreationInputTokens": 0, "costUSD": 0.0001}}
    feed(parser, [result(modelUsage=model_usage)])
    assert parser.usage == TokenUsage(2540, 8500, 300, 165, 0)
    assert parser.turns == 2  # no assistant message seen: num_turns stands in


def test_http_400_reported_as_success_is_an_error():
    parser = ADAPTER.new_parser()
    events = feed(parser, [
        assistant("e1", {"type": "text", "text": "API Error: 400 scripted invalid request"},
                  {"input_tokens": 0, "output_tokens": 0}, model="<synthetic>", error="unknown"),
        result({"input_tokens": 0, "output_tokens": 0}, is_error=True, api_error_status=400,
               result="API Error: 400 scripted invalid request", total_cost_usd=0),
    ])
    assert any(e.kind == EventKind.ERROR for e in events)
    assert parser.usage == TokenUsage() and parser.turns == 0  # the synthetic message is not a model call
    outcome = parser.outcome(0, killed=False)  # whatever the exit code
    assert outcome.errored and "400" in outcome.error


def test_missing_result_is_an_error_unless_killed():
    parser = ADAPTER.new_parser()
    feed(parser, [assistant("m1", {"type": "text", "text": "x"}, CALL1)])
    assert parser.outcome(143, killed=False).errored
    assert not parser.outcome(143, killed=True).errored


def test_garbage_and_stderr_are_kept_raw():
    parser = ADAPTER.new_parser()
    assert [e.kind for e in parser.feed("stdout", b"\xff\xfe not json")] == [EventKind.RAW]
    assert [e.kind for e in parser.feed("stdout", b"[1, 2]")] == [EventKind.RAW]
    assert [e.kind for e in parser.feed("stderr", b'{"type": "result"}')] == [EventKind.RAW]
    assert not parser.final_seen


def test_session_recovery_keeps_the_largest_copy_per_message():
    session = b"\n".join([
        line({"type": "user", "message": {"content": "hi"}}),
        assistant("m1", {"type": "text"}, {**CALL1, "output_tokens": 10}),  # a streaming snapshot
        assistant("m1", {"type": "text"}, {**CALL1, "output_tokens": 50}),
        assistant("m1", {"type": "text"}, {**CALL1, "output_tokens": 50}),
        assistant("e1", {"type": "text"}, {"input_tokens": 0, "output_tokens": 0}, model="<synthetic>"),
        assistant("m2", {"type": "text"}, {**CALL2, "output_tokens": 105}),
    ])
    recovery = ADAPTER.recover({".claude/projects/-w/s.jsonl": session})
    assert recovery.usage == TokenUsage(2500, 8500, 300, 155, 0) and recovery.turns == 2
    assert ADAPTER.recover({"x.jsonl": b"not json\n"}) is None


def test_absorb_takes_the_session_after_a_kill():
    parser = ADAPTER.new_parser()
    feed(parser, [assistant("m1", {"type": "text"}, CALL1), assistant("m2", {"type": "text"}, CALL2)])
    recovery = ADAPTER.recover({"s.jsonl": b"\n".join([assistant("m1", {"type": "text"}, {**CALL1, "output_tokens": 50}),
                                                       assistant("m2", {"type": "text"}, {**CALL2, "output_tokens": 105})])})
    event = parser.absorb(recovery)
    assert event.usage == TokenUsage(output=153) and event.turns == 0
    assert parser.absorb(recovery) is None  # nothing new the second time


def test_absorb_merges_per_message_when_the_files_lack_the_last_call():
    """Recorded in the e2e loop: killed after its 5th call, Claude Code printed no ``result``
    and its session file (written on a 100 ms timer) lacked the 5th message. The four it has
    are final; the stream's copies of them were ``message_start`` estimates (output 1). Each
    call keeps its larger figures; a smaller session total must not throw the four away."""
    streams = FIXTURES / "streams" / "claude-code"
    stdout = streams.joinpath("loop-killed.stdout.jsonl").read_bytes().splitlines()[:10]  # up to call 5
    session = streams.joinpath("loop-killed.session.jsonl").read_bytes().splitlines()[:4]  # calls 1-4
    parser = ADAPTER.new_parser()
    feed(parser, stdout)
    recorded = {}  # message id -> usage, as the CLI wrote it (session file first, stdout after)
    for raw in session + stdout:
        message = json.loads(raw).get("message") or {}
        if "usage" in message:
            recorded.setdefault(message["id"], message["usage"])
    expected = TokenUsage(*(sum(u[key] for u in recorded.values()) for key in
                            ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")))
    assert len(recorded) == 5 and parser.usage != expected  # the stream alone says output 5
    event = parser.absorb(ADAPTER.recover({"s.jsonl": b"\n".join(session)}))
    assert parser.usage == expected and parser.turns == 5
    assert event.usage.output == expected.output - 5 and event.turns == 0
    assert parser.absorb(ADAPTER.recover({"s.jsonl": b"\n".join(session)})) is None


def test_live_session_reads_merge_with_stdout_in_any_order():
    """The runner reads the session file while Claude Code runs: a call may be in the file
    before its stdout line is parsed, or after. Either way each call counts once, at its final
    figures, and the ``result`` total changes nothing when they were already right."""
    streams = FIXTURES / "streams" / "claude-code"
    stdout = streams.joinpath("loop-killed.stdout.jsonl").read_bytes().splitlines()
    session = streams.joinpath("loop-killed.session.jsonl").read_bytes().splitlines()
    final = {}  # message id -> usage as the session file recorded it
    for raw in session:
        message = json.loads(raw)["message"]
        final[message["id"]] = message["usage"]
    expected = TokenUsage(*(sum(u[key] for u in final.values()) for key in
                            ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")))
    parser = ADAPTER.new_parser()
    assert parser.absorb(ADAPTER.recover({"s.jsonl": session[0]})).turns == 1  # call 1, file first
    feed(parser, stdout[:4])  # calls 1 and 2 on stdout: 1 adds nothing, 2 its estimate
    assert parser.turns == 2
    parser.absorb(ADAPTER.recover({"s.jsonl": b"\n".join(session[:3])}))  # 2 corrected, 3 first seen
    feed(parser, stdout[4:10])  # calls 3 to 5
    parser.absorb(ADAPTER.recover({"s.jsonl": b"\n".join(session)}))
    assert parser.usage == expected and parser.turns == 5
    result = json.loads(stdout[-1])
    assert result["type"] == "result" and sum(m["outputTokens"] for m in result["modelUsage"].values()) == expected.output
    assert not [event for event in feed(parser, stdout[10:]) if event.usage]  # the total agrees: no correction


def test_launch():
    ctx = LaunchContext(model_name="claude-sonnet-4-6", instruction="-starts with a dash", workspace="/w",
                        home="/h", base_url="http://127.0.0.1:9/", api_key="k", clis_root="/c")
    command = ADAPTER.command(ctx)
    assert command[0] == "/c/node_modules/.bin/claude" and command[-2:] == ["--", "-starts with a dash"]
    assert {"-p", "--verbose", "--dangerously-skip-permissions"} <= set(command)
    assert command[command.index("--output-format") + 1] == "stream-json"
    env = ADAPTER.environment(ctx)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9" and env["ANTHROPIC_API_KEY"] == "k"
    assert env["IS_SANDBOX"] == "1" and env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert ADAPTER.merged_classes == {"reasoning": "output"} and ADAPTER.reports_cost_for == {"anthropic"}
