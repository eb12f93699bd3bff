"""``agentmeter transcript parse`` on streams the real CLIs printed (``tests/fixtures/streams``,
saved by the end-to-end tests): the normalized classes must be what the scripted server served
in that run (folded where the CLI cannot tell classes apart); turns, tool calls and the error
verdict what the runner recorded for that trial."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from agentmeter_tui.core.harnesses import get_adapter
from agentmeter_tui.core.harnesses.summary import session_files, summarize
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.wire import fold
from tests.conftest import FIXTURES, agentmeter

STREAMS = FIXTURES / "streams"
CASES = sorted(STREAMS.glob("*/*.stdout.jsonl"))
# What the loop scenario serves for each call (the runaway of the e2e tests, "loop-killed").
LOOP_CALL = TokenUsage.from_dict(tomllib.loads((FIXTURES / "scenarios" / "loop.toml").read_text())["turns"][0]["usage"])


def served_tokens(cli: str, expected: dict) -> TokenUsage:
    """The token classes the CLI's adapter must report for a recorded run, from what the
    scripted server served in it (``served`` in the fixture), never from an adapter's output:
    the whole of it, folded where the CLI cannot tell classes apart; for a killed loop, the
    first ``turns`` calls, each served the same (a call cut off by the kill is never reported)."""
    merged = get_adapter(cli).merged_classes
    served = TokenUsage(**expected["served"])
    if expected["status"] != "killed":
        return fold(served, merged)
    kept = sum([LOOP_CALL] * expected["turns"], TokenUsage())
    assert kept.raw <= served.raw, "the fixture reports more calls than were served"
    return fold(kept, merged)


def expected_of(stream: Path) -> dict:
    return json.loads(stream.with_name(stream.name.replace(".stdout.jsonl", ".expected.json")).read_text())


def session_of(stream: Path) -> Path | None:
    session = stream.with_name(stream.name.replace(".stdout.jsonl", ".session.jsonl"))
    return session if session.exists() else None


@pytest.mark.parametrize("stream", CASES, ids=[f"{p.parent.name}/{p.name.split('.')[0]}" for p in CASES])
def test_saved_streams_give_the_recorded_summary(stream):
    cli, expected, session = stream.parent.name, expected_of(stream), session_of(stream)
    adapter = get_adapter(cli)
    files = session_files(adapter, session) if session else {}
    summary = summarize(adapter, stream.read_bytes().splitlines(), files, killed=expected["status"] == "killed")
    assert summary.usage == served_tokens(cli, expected)
    assert summary.tool_calls == expected["tool_calls"]
    assert summary.turns == expected["turns"]
    assert summary.outcome.errored == (expected["status"] == "errored"), summary.outcome
    if expected.get("reported_cost_usd") is not None:
        assert float(summary.reported_cost_usd) == pytest.approx(expected["reported_cost_usd"])


def test_every_adapter_of_this_issue_has_fixtures():
    for cli in ("claude-code", "codex", "gemini-cli"):
        names = {p.name.split(".")[0] for p in (STREAMS / cli).glob("*.stdout.jsonl")}
        assert {"write-file", "cache-heavy", "reasoning", "error-400", "loop-killed"} <= names, cli


def test_command_json_keys_and_classes():
    stream = STREAMS / "claude-code" / "write-file.stdout.jsonl"
    result = agentmeter("transcript", "parse", "--cli", "claude-code", str(stream), "--json", check=True)
    out = json.loads(result.stdout)
    assert {"tokens", "turns", "tool_calls", "reported_cost_usd", "is_error", "events"} <= set(out)
    assert TokenUsage(**out["tokens"]) == served_tokens("claude-code", expected_of(stream))
    assert out["turns"] == 2 and out["tool_calls"] == 1 and out["is_error"] is False
    assert out["reported_cost_usd"] > 0 and out["events"]["tool_call"] == 1


def test_command_reads_a_home_folder_for_the_session(tmp_path):
    # A killed Codex run: stdout has no usage at all, the rollout file under HOME has it.
    stream = STREAMS / "codex" / "loop-killed.stdout.jsonl"
    rollout = tmp_path / "home" / ".codex" / "sessions" / "2026" / "11" / "26" / "rollout-x.jsonl"
    rollout.parent.mkdir(parents=True)
    shutil.copy(STREAMS / "codex" / "loop-killed.session.jsonl", rollout)
    bare = json.loads(agentmeter("transcript", "parse", "--cli", "codex", str(stream), "--json", check=True).stdout)
    assert bare["tokens"]["cached_input"] == 0 and bare["is_error"]  # no turn.completed, not told it was killed
    result = agentmeter("transcript", "parse", "--cli", "codex", str(stream), "--session", str(tmp_path / "home"),
                        "--killed", "--json", check=True)
    out = json.loads(result.stdout)
    assert TokenUsage(**out["tokens"]) == served_tokens("codex", expected_of(stream))
    assert out["usage_source"] == "session"
    assert out["is_error"] is False


def test_human_output_names_merged_classes():
    stream = STREAMS / "gemini-cli" / "cache-heavy.stdout.jsonl"
    result = agentmeter("transcript", "parse", "--cli", "gemini-cli", str(stream), check=True)
    assert "cannot tell cache write apart: counted as uncached input" in result.stdout
    assert "cached input" in result.stdout and "18,800" in result.stdout


def test_command_errors(tmp_path):
    unknown = agentmeter("transcript", "parse", "--cli", "no-such-cli", str(tmp_path / "x"))
    assert unknown.returncode == 2 and "unknown adapter 'no-such-cli'" in unknown.stderr
    missing = agentmeter("transcript", "parse", "--cli", "codex", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2 and "absent.jsonl" in missing.stderr
    stream = tmp_path / "s.jsonl"
    stream.write_text("not json at all\n")
    empty_home = tmp_path / "home"
    empty_home.mkdir()
    no_session = agentmeter("transcript", "parse", "--cli", "codex", str(stream), "--session", str(empty_home))
    assert no_session.returncode == 2 and "no session files of codex" in no_session.stderr
    raw = json.loads(agentmeter("transcript", "parse", "--cli", "codex", str(stream), "--json", check=True).stdout)
    assert raw["events"] == {"raw": 1} and raw["is_error"]  # garbage is kept as raw; no turn.completed
