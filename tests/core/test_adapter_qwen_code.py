"""The Qwen Code adapter's parser, chat-file recovery and launch, on lines shaped like its real
stream-json output (``tests/fixtures/streams/qwen-code/`` has streams it printed itself)."""

from __future__ import annotations

import json

from agentmeter_tui.core.harnesses import LaunchContext, get_adapter
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import EventKind
from tests.conftest import FIXTURES

ADAPTER = get_adapter("qwen-code")
STREAMS = FIXTURES / "streams" / "qwen-code"


def line(obj: dict) -> bytes:
    return json.dumps(obj).encode()


def assistant(message_id: str, blocks: list[dict], usage: dict | None = None) -> bytes:
    message = {"id": message_id, "type": "message", "role": "assistant", "model": "qwen3-coder-plus",
               "content": blocks, "usage": usage or {"input_tokens": 0, "output_tokens": 0}}
    return line({"type": "assistant", "uuid": message_id, "message": message})


def result(usage: dict, text: str = "Done.", **extra) -> bytes:
    return line({"type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "result": text,
                 "usage": usage, **extra})


def feed(parser, lines: list[bytes]) -> list:
    return [event for raw in lines for event in parser.feed("stdout", raw)]


def two_calls() -> list[bytes]:
    # What Qwen printed for a 1200/4000/300/30/20 call and a 1300/4500/0/80/25 call.
    return [
        line({"type": "system", "subtype": "init", "model": "m", "session_id": "s", "qwen_code_version": "0.15.10"}),
        assistant("a1", [{"type": "thinking", "thinking": "I should write the file."}]),
        assistant("a2", [{"type": "text", "text": "Writing the file."}]),
        assistant("a3", [{"type": "tool_use", "id": "c1", "name": "run_shell_command",
                          "input": {"command": "echo hi > out.txt"}}],
                  {"input_tokens": 5500, "output_tokens": 50, "cache_read_input_tokens": 4000, "total_tokens": 5550}),
        line({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "is_error": False, "content": "Exit Code: 0"}]}}),
        assistant("a4", [{"type": "text", "text": "Done."}],
                  {"input_tokens": 5800, "output_tokens": 105, "cache_read_input_tokens": 4500}),
    ]


def test_anthropic_names_with_openai_meaning():
    parser = ADAPTER.new_parser()
    events = feed(parser, two_calls())
    # input_tokens holds the cache reads (and writes), output_tokens the reasoning.
    assert parser.usage == TokenUsage(uncached_input=1500 + 1300, cached_input=8500, output=155)
    assert [e.kind for e in events].count(EventKind.USAGE) == 2 and parser.turns == 2  # zero fragments skipped
    kinds = [e.kind for e in events]
    assert EventKind.REASONING in kinds and EventKind.TOOL_RESULT in kinds
    (call,) = [e for e in events if e.kind == EventKind.TOOL_CALL]
    assert call.text == "echo hi > out.txt" and call.tool_name == "run_shell_command" and call.tool_key


def test_the_result_total_corrects_the_sum_and_is_never_added():
    parser = ADAPTER.new_parser()
    feed(parser, two_calls())
    same = feed(parser, [result({"input_tokens": 11300, "output_tokens": 155, "cache_read_input_tokens": 8500})])
    assert [e.kind for e in same] == [EventKind.SYSTEM]  # nothing new: no usage event
    assert parser.usage == TokenUsage(2800, 8500, 0, 155, 0) and parser.final_seen

    # A call that only the total knows of (Qwen's background memory agent prints no assistant event).
    parser = ADAPTER.new_parser()
    feed(parser, two_calls())
    events = feed(parser, [result({"input_tokens": 11400, "output_tokens": 175, "cache_read_input_tokens": 8500})])
    assert events[0].usage == TokenUsage(uncached_input=100, output=20)
    assert parser.usage == TokenUsage(2900, 8500, 0, 175, 0)


def test_a_repeated_message_id_counts_once():
    parser = ADAPTER.new_parser()
    call = {"input_tokens": 5500, "output_tokens": 50, "cache_read_input_tokens": 4000}
    feed(parser, [assistant("m1", [{"type": "text", "text": "a"}], call),
                  assistant("m1", [{"type": "text", "text": "a"}], call)])
    assert parser.usage == TokenUsage(1500, 4000, 0, 50, 0) and parser.turns == 1


def test_http_400_reported_as_success_is_an_error():
    parser = ADAPTER.new_parser()
    text = "[API Error: 400 scripted invalid request]"
    events = feed(parser, [assistant("e1", [{"type": "text", "text": text}]),
                           result({"input_tokens": 0, "output_tokens": 0}, text=text)])
    assert any(e.kind == EventKind.ERROR for e in events)
    outcome = parser.outcome(0, killed=False)  # exit 0, subtype success, is_error false
    assert outcome.errored and "400 scripted invalid request" in outcome.error


def test_no_result_is_an_error_unless_killed():
    parser = ADAPTER.new_parser()
    feed(parser, two_calls()[:4])
    assert parser.outcome(130, killed=False).errored
    assert not parser.outcome(130, killed=True).errored
    assert parser.feed("stderr", b"Operation cancelled.")[0].kind == EventKind.RAW
    assert parser.feed("stdout", b"\xff not json")[0].kind == EventKind.RAW


def chat_record(uuid: str, prompt: int, cached: int, candidates: int, thoughts: int) -> bytes:
    return line({"type": "assistant", "uuid": uuid, "usageMetadata": {
        "promptTokenCount": prompt, "candidatesTokenCount": candidates, "thoughtsTokenCount": thoughts,
        "cachedContentTokenCount": cached, "totalTokenCount": prompt + candidates}})


def test_recovery_from_the_chat_file_counts_each_record_once():
    chat = b"\n".join([
        line({"type": "user", "uuid": "u"}),
        chat_record("r1", 5500, 4000, 50, 20),
        chat_record("r1", 5500, 4000, 50, 20),  # written again under the same uuid
        line({"type": "system", "subtype": "ui_telemetry", "systemPayload": {"uiEvent": {"input_token_count": 9}}}),
        chat_record("r2", 2400, 2000, 100, 0),
    ])
    recovery = ADAPTER.recover({".qwen/projects/p/chats/s.jsonl": chat})
    # Thoughts stay inside output, as on stdout: a killed trial's classes mean what a finished one's do.
    assert recovery.usage == TokenUsage(uncached_input=1500 + 400, cached_input=6000, output=150)
    assert recovery.turns == 2 and "chats/s.jsonl" in recovery.source
    assert ADAPTER.recover({"x.jsonl": b"garbage\n"}) is None


def context(**overrides) -> LaunchContext:
    values = {"model_name": "qwen3-coder-plus", "instruction": "- list the files", "workspace": "/w", "home": "/h",
              "base_url": "http://127.0.0.1:9000", "api_key": "k", "clis_root": "/clis"}
    return LaunchContext(**{**values, **overrides})


def test_launch():
    ctx = context()
    command = ADAPTER.command(ctx)
    assert command[0] == "/clis/node_modules/.bin/qwen"
    assert command[-1] == "\n- list the files"  # never read as an option
    assert ["--output-format", "stream-json"] == command[command.index("--output-format"):][:2]
    env = ADAPTER.environment(ctx)
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:9000/v1" and env["QWEN_CODE_NO_RELAUNCH"] == "true"
    settings = json.loads(ADAPTER.home_files(ctx)[".qwen/settings.json"])
    assert settings["memory"]["enableManagedAutoMemory"] is False and settings["telemetry"]["enabled"] is False
    assert ADAPTER.merged_classes == {"cache_write": "uncached_input", "reasoning": "output"}


def test_saved_streams_exist_for_the_five_scenarios():
    names = {p.name.split(".")[0] for p in STREAMS.glob("*.stdout.jsonl")}
    assert {"write-file", "cache-heavy", "reasoning", "error-400", "loop-killed"} <= names
    parser = ADAPTER.new_parser()
    feed(parser, (STREAMS / "error-400.stdout.jsonl").read_bytes().splitlines())
    assert parser.final_seen and parser.outcome(0, killed=False).errored
