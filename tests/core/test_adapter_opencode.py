"""The opencode adapter: per-step usage and cost, tool events, errors, and its config
(``tests/fixtures/streams/opencode/`` has streams it printed itself)."""

from __future__ import annotations

import json
from decimal import Decimal

from agentmeter_tui.core.harnesses import LaunchContext, get_adapter
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import EventKind
from tests.conftest import FIXTURES

ADAPTER = get_adapter("opencode")
STREAMS = FIXTURES / "streams" / "opencode"


def line(kind: str, part: dict | None = None, **extra) -> bytes:
    return json.dumps({"type": kind, "sessionID": "ses_1", "part": part or {}, **extra}).encode()


def step_finish(part_id: str, tokens: dict, cost: float, reason: str = "tool-calls") -> bytes:
    return line("step_finish", {"id": part_id, "type": "step-finish", "reason": reason, "tokens": tokens,
                                "cost": cost})


def tokens(inp: int, out: int, reasoning: int, read: int, write: int = 0) -> dict:
    return {"total": inp + out + reasoning + read + write, "input": inp, "output": out, "reasoning": reasoning,
            "cache": {"write": write, "read": read}}


def feed(parser, lines: list[bytes]) -> list:
    return [event for raw in lines for event in parser.feed("stdout", raw)]


def test_steps_are_summed_once_each_with_their_cost():
    parser = ADAPTER.new_parser()
    tool = {"type": "tool", "tool": "bash", "callID": "c1", "state": {
        "status": "completed", "input": {"command": "echo hi > out.txt", "description": "run"},
        "output": "(no output)", "metadata": {"exit": 0}}}
    first = step_finish("p1", tokens(1500, 30, 20, 4000), 0.00645)
    events = feed(parser, [
        line("step_start", {"type": "step-start"}),
        line("reasoning", {"type": "reasoning", "text": "I should write the file."}),
        line("text", {"type": "text", "text": "Writing the file."}),
        line("tool_use", tool),
        first, first,  # a repeated step is counted once
        line("step_start", {"type": "step-start"}),
        step_finish("p2", tokens(1300, 80, 25, 4500), 0.006825, reason="stop"),
    ])
    # input excludes cache reads; output excludes reasoning, which has its own figure.
    assert parser.usage == TokenUsage(uncached_input=2800, cached_input=8500, output=110, reasoning=45)
    assert parser.turns == 2 and parser.tool_calls == 1 and parser.final_seen
    assert parser.reported_cost_usd == Decimal("0.013275")
    kinds = [e.kind for e in events]
    assert kinds[:5] == [EventKind.SYSTEM, EventKind.REASONING, EventKind.ASSISTANT, EventKind.TOOL_CALL,
                         EventKind.TOOL_RESULT]
    assert kinds.count(EventKind.USAGE) == 2
    call = events[3]
    assert call.text == "echo hi > out.txt" and call.tool_name == "bash" and call.tool_key.startswith("bash:")
    assert [e.reported_cost_usd for e in events if e.kind == EventKind.USAGE] == [Decimal("0.00645"),
                                                                                  Decimal("0.013275")]
    assert parser.outcome(0, killed=False).errored is False


def test_a_failed_tool_and_no_configured_price():
    parser = ADAPTER.new_parser()
    failed = {"type": "tool", "tool": "bash", "state": {"status": "completed", "input": {"command": "false"},
                                                        "output": "", "metadata": {"exit": 1}}}
    events = feed(parser, [line("tool_use", failed), step_finish("p1", tokens(100, 20, 0, 0), 0, reason="stop")])
    assert events[1].kind == EventKind.TOOL_RESULT and events[1].is_error
    assert parser.reported_cost_usd is None  # cost 0 over real tokens: no price configured, not a free run


def test_error_event_and_silent_failures():
    parser = ADAPTER.new_parser()
    error = {"name": "APIError", "data": {"message": "scripted invalid request", "statusCode": 400,
                                          "isRetryable": False}}
    (event,) = feed(parser, [json.dumps({"type": "error", "sessionID": "s", "error": error}).encode()])
    assert event.kind == EventKind.ERROR and event.is_error
    outcome = parser.outcome(1, killed=False)
    assert outcome.errored and outcome.error == "APIError (HTTP 400): scripted invalid request"
    assert ADAPTER.new_parser().outcome(0, killed=False).errored  # no step at all: it never answered
    assert not ADAPTER.new_parser().outcome(-9, killed=True).errored


def test_config_and_launch():
    ctx = LaunchContext(model_name="deep-model", instruction="Fix it.", workspace="/w", home="/h",
                        base_url="http://127.0.0.1:9000/", api_key="secret-key", clis_root="/clis",
                        price={"input": "3", "cached_input": "0.3", "cache_write": "3.75", "output": "15"})
    command = ADAPTER.command(ctx)
    assert command[0] == "/clis/node_modules/.bin/opencode" and command[-1] == "Fix it."
    assert command[command.index("--dir") + 1] == "/w" and command[command.index("-m") + 1] == "agentmeter/deep-model"
    assert "--title" in command and "--thinking" in command  # no title call; reasoning text on stdout
    env = ADAPTER.environment(ctx)
    assert env["PWD"] == "/w" and env["OPENCODE_PURE"] == "1" and env["npm_config_registry"].startswith("http://127.")
    assert env["AGENTMETER_OPENCODE_KEY"] == "secret-key"
    text = ADAPTER.home_files(ctx)[".config/opencode/opencode.json"].decode()
    assert "secret-key" not in text
    config = json.loads(text)
    provider = config["provider"]["agentmeter"]
    assert provider["options"] == {"baseURL": "http://127.0.0.1:9000/v1", "apiKey": "{env:AGENTMETER_OPENCODE_KEY}"}
    assert provider["models"]["deep-model"]["cost"] == {"input": 3.0, "cache_read": 0.3, "cache_write": 3.75,
                                                       "output": 15.0}
    assert config["model"] == "agentmeter/deep-model" and config["permission"]["bash"] == "allow"


def test_saved_streams_exist_for_the_five_scenarios():
    names = {p.name.split(".")[0] for p in STREAMS.glob("*.stdout.jsonl")}
    assert {"write-file", "cache-heavy", "reasoning", "error-400", "loop-killed"} <= names
    expected = json.loads((STREAMS / "reasoning.expected.json").read_text())
    parser = ADAPTER.new_parser()
    feed(parser, (STREAMS / "reasoning.stdout.jsonl").read_bytes().splitlines())
    assert parser.usage.as_dict() == expected["served"]  # nothing merged in this one
