"""The Kimi CLI adapter: transcript from its plain-message stdout, usage only from its wire
log, plain-text errors, and launch (``tests/fixtures/streams/kimi-cli/`` has real output; its
``*.session.jsonl`` files are the usage lines of the wire logs)."""

from __future__ import annotations

import json
import tomllib

from agentmeter_tui.core.harnesses import LaunchContext, get_adapter
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import EventKind
from tests.conftest import FIXTURES
from tests.core.test_transcript import served_tokens

ADAPTER = get_adapter("kimi-cli")
STREAMS = FIXTURES / "streams" / "kimi-cli"


def line(obj: dict) -> bytes:
    return json.dumps(obj).encode()


def feed(parser, lines: list[bytes]) -> list:
    return [event for raw in lines for event in parser.feed("stdout", raw)]


def test_messages_become_events_and_carry_no_usage():
    parser = ADAPTER.new_parser()
    events = feed(parser, [
        line({"role": "assistant", "content": [{"type": "think", "think": "I should write the file."},
                                               {"type": "text", "text": "Writing the file."}],
              "tool_calls": [{"type": "function", "id": "c1", "function": {
                  "name": "Shell", "arguments": "{\"command\":\"echo hi > out.txt\"}"}}]}),
        line({"role": "tool", "content": "<system>Command executed successfully.</system>", "tool_call_id": "c1"}),
        line({"role": "tool", "content": [{"type": "text", "text": "<system>ERROR: Command failed with exit code: 1."
                                                                    "</system>"}], "tool_call_id": "c2"}),
        line({"role": "assistant", "content": "Done: out.txt contains hi."}),
    ])
    assert [e.kind for e in events] == [EventKind.REASONING, EventKind.ASSISTANT, EventKind.TOOL_CALL,
                                        EventKind.TOOL_RESULT, EventKind.TOOL_RESULT, EventKind.ASSISTANT]
    call = events[2]
    assert call.text == "echo hi > out.txt" and call.tool_name == "Shell" and parser.tool_calls == 1
    assert not events[3].is_error and events[4].is_error
    assert parser.usage == TokenUsage() and not parser.final_seen  # so the runner always reads the wire log
    assert parser.outcome(0, killed=False).errored is False


def status(message_id: str | None, usage: dict | None) -> bytes:
    payload = {"context_tokens": 1, "token_usage": usage, "message_id": message_id}
    return line({"timestamp": 1.0, "message": {"type": "StatusUpdate", "payload": payload}})


def test_wire_log_usage_once_per_call():
    wire = b"\n".join([
        line({"type": "metadata", "protocol_version": "1.10"}),
        line({"timestamp": 1.0, "message": {"type": "StepBegin", "payload": {"n": 1}}}),
        status("m1", {"input_other": 1500, "output": 50, "input_cache_read": 4000, "input_cache_creation": 0}),
        status("m1", {"input_other": 1500, "output": 50, "input_cache_read": 4000, "input_cache_creation": 0}),
        status(None, None),  # "None fields indicate no change"
        status("m2", {"input_other": 1300, "output": 105, "input_cache_read": 4500, "input_cache_creation": 7}),
    ])
    recovery = ADAPTER.recover({".kimi/sessions/h/s/wire.jsonl": wire})
    assert recovery.usage == TokenUsage(uncached_input=2800, cached_input=8500, cache_write=7, output=155)
    assert recovery.turns == 2
    parser = ADAPTER.new_parser()
    event = parser.absorb(recovery)
    assert event.usage == recovery.usage and event.turns == 2 and parser.usage == recovery.usage
    assert parser.absorb(recovery) is None  # read again (the runner polls it): nothing new
    assert ADAPTER.recover({"w": b"{}\n"}) is None


def test_plain_text_error_wrapped_over_lines_is_one_error():
    parser = ADAPTER.new_parser()
    events = feed(parser, [b"Error code: 400 - {'error': {'message': 'scripted invalid request', 'type': 'inv",
                           b"alid_request_error', 'param': None, 'code': None}}"])
    assert [e.kind for e in events] == [EventKind.ERROR, EventKind.RAW]
    outcome = parser.outcome(1, killed=False)
    assert outcome.errored and "'type': 'invalid_request_error'" in outcome.error
    # stderr noise ("To resume this session: ...") is not an error.
    quiet = ADAPTER.new_parser()
    assert quiet.feed("stderr", b"To resume this session: kimi -r x")[0].kind == EventKind.RAW
    assert not quiet.outcome(0, killed=False).errored and quiet.outcome(75, killed=False).errored


def test_launch_keeps_the_key_out_of_the_config_file():
    ctx = LaunchContext(model_name="kimi-k2", instruction="-v is not a flag", workspace="/w", home="/h",
                        base_url="http://127.0.0.1:9000", api_key="secret-key", clis_root="/clis")
    command = ADAPTER.command(ctx)
    assert command[0] == "/clis/kimi-cli/bin/kimi" and command[-1] == "--prompt=-v is not a flag"
    assert command[command.index("--work-dir") + 1] == "/w"
    assert ADAPTER.environment(ctx)["KIMI_API_KEY"] == "secret-key"
    text = ADAPTER.home_files(ctx)[".kimi/config.toml"].decode()
    config = tomllib.loads(text)
    assert "secret-key" not in text and config["telemetry"] is False
    provider = config["providers"][config["models"][config["default_model"]]["provider"]]
    assert provider["base_url"] == "http://127.0.0.1:9000/v1" and config["models"]["agentmeter"]["model"] == "kimi-k2"
    assert ADAPTER.live_session_poll and ADAPTER.install.registry == "pypi" and ADAPTER.version == "1.51.0"


def test_saved_streams_and_wire_usage():
    names = {p.name.split(".")[0] for p in STREAMS.glob("*.stdout.jsonl")}
    assert {"write-file", "cache-heavy", "reasoning", "error-400", "loop-killed"} <= names
    expected = json.loads((STREAMS / "write-file.expected.json").read_text())
    recovery = ADAPTER.recover({"wire.jsonl": (STREAMS / "write-file.session.jsonl").read_bytes()})
    assert recovery.usage == served_tokens("kimi-cli", expected) and recovery.turns == expected["turns"]
