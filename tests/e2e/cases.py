"""The five scenarios every real agent CLI must pass end to end, and the checks they share.

(a) a shell call writes a file, then a final answer; (b) a cache-heavy run with cache writes
and reads; (c) reasoning tokens; (d) an HTTP 400 that must end as ``errored``; (e) a runaway
stopped by a token budget, with no process of the trial left and the finished calls' usage
kept. Token classes are compared with what the scripted server served, after folding the
classes the CLI cannot tell apart (its adapter's ``merged_classes``).

Set ``AGENTMETER_SAVE_STREAMS=1`` to (re)write the CLI's own output of each run into
``tests/fixtures/streams/<cli>/`` (the fixtures of ``agentmeter transcript parse``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

from agentmeter_tui.core.harnesses import ADAPTERS
from agentmeter_tui.core.harnesses.jsonl import load_object
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.wire import fold
from tests.conftest import FIXTURES
from tests.core.test_kill import processes_of
from tests.e2e.harness import TrialResult, run_scenario

WRITE_FILE = """
description = "a shell call writes out.txt, then a final answer"
[[turns]]
reasoning = "I should write the file."
text = "Writing the file."
shell = "echo hi > out.txt"
usage = { uncached_input = 1200, cached_input = 4000, cache_write = 300, output = 30, reasoning = 20 }
[[turns]]
text = "Done: out.txt contains hi."
usage = { uncached_input = 1300, cached_input = 4500, output = 80, reasoning = 25 }
"""
CHECK_FILE = '#!/bin/sh\ngrep -qx hi "$AGENTMETER_WORKSPACE/out.txt"\n'

CACHE_HEAVY = (FIXTURES / "scenarios" / "cache-heavy.toml").read_text()
REASONING = (FIXTURES / "scenarios" / "reasoning.toml").read_text()
CHECK_ANSWER = '#!/bin/sh\ngrep -qx 42 "$AGENTMETER_WORKSPACE/answer.txt"\n'
ERROR_400 = (FIXTURES / "scenarios" / "error-400.toml").read_text()
LOOP = (FIXTURES / "scenarios" / "loop.toml").read_text()  # 2,500 tokens a call, forever
LOOP_BUDGET = 10_000


def merged(cli: str) -> dict[str, str]:
    return ADAPTERS.get(cli).merged_classes


def assert_classes_match(result: TrialResult, cli: str, served: TokenUsage | None = None) -> None:
    """The CLI's normalized classes equal what the server served, folded where the CLI cannot
    tell classes apart; with nothing folded they must be equal as they are."""
    served = result.served if served is None else served
    classes = merged(cli)
    assert fold(result.usage, classes) == fold(served, classes), (result.usage, served, classes)
    for folded in classes:  # a class the CLI cannot see must not be made up either
        assert getattr(result.usage, folded) == 0


def served_calls(result: TrialResult) -> list[tuple[str, bool, TokenUsage]]:
    """(status, completed, usage) of each model call the server answered, in order."""
    return [(str(status), bool(completed), TokenUsage(*values))
            for _turn, status, completed, values in result.extra["scripted"]["served"]]


def assert_runaway_stopped(result: TrialResult, cli: str) -> None:
    """(e): killed by the token budget, no process left, and the usage kept is exactly that
    of the first ``turns`` calls the server completed (calls the CLI never reported, cut off
    by the kill, are the only ones missing)."""
    row = result.row
    assert row["status"] == "killed" and row["reason"] == "budget:tokens", (row["status"], row["reason"])
    assert processes_of(row["proc_token"]) == [], f"{cli} left processes behind"
    assert result.usage.raw >= LOOP_BUDGET
    served = served_calls(result)
    completed = [usage for _status, done, usage in served if done]
    if cli == "claude-code":
        completed = claude_final_or_announced(result, served) or completed
    kept = sum(completed[:row["turns"]], TokenUsage())
    assert row["turns"] >= LOOP_BUDGET // 2500
    classes = merged(cli)
    assert fold(result.usage, classes) == fold(kept, classes), (result.usage, kept, row["turns"], len(completed))


def claude_final_or_announced(result: TrialResult,
                              served: list[tuple[str, bool, TokenUsage]]) -> list[TokenUsage] | None:
    """Claude Code prints each call with its ``message_start`` output count (1); the final one
    reaches only its ``result`` line and its session file, written on a 100 ms timer. Killed
    before its ``result`` (seen once in CI under load), each call is knowable only as the CLI
    wrote it down: the served figures with the largest output count it recorded, in its
    session file or on stdout. A call whose start it printed counts so even when the kill cut
    the rest of its stream (its input is in the start: seen once in CI); a call it never
    printed counts only if the server finished it. None: the completed calls are exact."""
    lines = json_lines(stdout_stream(result))
    home = Path(result.row["workspace"]).parent / "home"
    if any(obj.get("type") == "result" for obj in lines) or not home.is_dir():
        return None  # exact; or its files are in a container this test cannot read
    files = [obj for path in home.glob(".claude/projects/*/*.jsonl") for obj in json_lines(path.read_bytes())]
    output: dict[str, int] = {}  # message id -> largest output_tokens recorded
    announced: list[str] = []  # message ids in the order stdout printed them (the server's order)
    for on_stdout, objects in ((True, lines), (False, files)):
        for obj in objects:
            message = obj.get("message") if obj.get("type") == "assistant" else None
            if isinstance(message, dict) and "usage" in message:
                if on_stdout and message["id"] not in output:
                    announced.append(message["id"])
                output[message["id"]] = max(output.get(message["id"], 0), message["usage"]["output_tokens"])
    return [replace(usage, output=output[announced[index]]) if index < len(announced) else usage
            for index, (_status, done, usage) in enumerate(served) if done or index < len(announced)]


def json_lines(data: bytes) -> list[dict]:
    """The JSON objects of a JSONL file; a line cut off by SIGKILL is skipped."""
    return [obj for line in data.splitlines() if (obj := load_object(line)) is not None]


def run_passing(tmp_path: Path, cli: str, scenario: str, name: str, *, turns: int, tool_calls: int,
                **run_kwargs) -> TrialResult:
    """Run a scenario the CLI must pass: passed, the classes as served, the scripted number of
    model calls and tool calls; its stream saved as fixture ``name`` (session files kept)."""
    result = run_scenario(tmp_path, cli, scenario, suite_extra=KEEP, **run_kwargs)
    assert result.row["status"] == "passed", (result.row["reason"], result.row["verifier_output"])
    assert_classes_match(result, cli)
    assert (result.row["turns"], result.row["tool_calls"]) == (turns, tool_calls)
    save_stream(result, cli, name)
    return result


def run_runaway(tmp_path: Path, cli: str, name: str | None = "loop-killed", **run_kwargs) -> TrialResult:
    """(e) for one CLI: the loop scenario under a token budget, checked and saved (unless
    ``name`` is None)."""
    result = run_scenario(tmp_path, cli, LOOP, budget=f"wall_seconds = 180\ntokens = {LOOP_BUDGET}", suite_extra=KEEP,
                          **run_kwargs)
    assert_runaway_stopped(result, cli)
    if name is not None:
        save_stream(result, cli, name)
    return result


def run_error_400(tmp_path: Path, cli: str, name: str = "error-400") -> TrialResult:
    """(d) for one CLI: a first call answered with HTTP 400 ends the trial as errored, with
    nothing counted, whatever the exit code (the caller checks the CLI's own signals)."""
    result = run_scenario(tmp_path, cli, ERROR_400, suite_extra=KEEP)
    assert result.row["status"] == "errored", (result.row["status"], result.row["reason"])
    assert result.usage == TokenUsage() and "error" in kinds(result)
    save_stream(result, cli, name)
    return result


def kinds(result: TrialResult) -> list[str]:
    return [row[2] for row in result.events()]


def stdout_stream(result: TrialResult) -> bytes:
    """The CLI's stdout as it printed it, rebuilt from the stored raw lines."""
    lines = [data for _seq, _ts, _kind, stream, _text, data in result.events() if stream == "stdout" and data]
    return b"".join(bytes(line).rstrip(b"\n") + b"\n" for line in lines)


KEEP = "keep_workspaces = true"  # suite_extra for tests that read the CLI's session files afterwards


def session_file(result: TrialResult, pattern: str) -> Path:
    """The one file matching ``pattern`` under the trial's HOME (the suite must keep workspaces)."""
    home = Path(result.row["workspace"]).parent / "home"
    (found,) = sorted(home.glob(pattern))
    return found


def save_stream(result: TrialResult, cli: str, name: str, extra_files: dict[str, Path] | None = None) -> None:
    """Keep this run's output as a fixture (only with AGENTMETER_SAVE_STREAMS=1), with a
    ``.expected.json`` of what the scripted server served, and the turns, tool calls and status
    the runner recorded. Sandbox
    paths become ``/sandbox``. When the trial's HOME was kept (``keep_workspaces = true``), the
    lines of the CLI's session files that carry usage go to ``<name>.session.jsonl``."""
    if os.environ.get("AGENTMETER_SAVE_STREAMS") != "1":
        return
    folder = FIXTURES / "streams" / cli
    folder.mkdir(parents=True, exist_ok=True)
    root = Path(result.row["workspace"]).parent if result.row.get("workspace") else None
    (folder / f"{name}.stdout.jsonl").write_bytes(_portable(stdout_stream(result), root))
    for suffix, path in (extra_files or {}).items():
        (folder / f"{name}.{suffix}").write_bytes(path.read_bytes())
    session = session_usage_lines(cli, root / "home") if root is not None and (root / "home").is_dir() else b""
    if session:
        (folder / f"{name}.session.jsonl").write_bytes(_portable(session, root))
    # Token expectations come from what the server served (tests/core/test_transcript.py folds
    # them as the CLI must): the adapter's own figures are what a fixture checks, never its answer.
    expected = {"served": result.served.as_dict(), "turns": result.row["turns"],
                "tool_calls": result.row["tool_calls"], "status": result.row["status"],
                "reported_cost_usd": result.row.get("cost_actual_usd")}
    (folder / f"{name}.expected.json").write_text(json.dumps(expected, indent=2) + "\n")


def session_usage_lines(cli: str, home: Path) -> bytes:
    """The lines of the CLI's session files under ``home`` from which its adapter recovers
    usage (the rest holds prompts, tool output and paths that a fixture does not need)."""
    adapter = ADAPTERS.get(cli)()
    kept = []
    for pattern in adapter.session_globs:
        for path in sorted(home.glob(pattern)):
            for line in path.read_bytes().splitlines():
                if line.strip() and adapter.recover({path.name: line}) is not None:
                    kept.append(line + b"\n")
    return b"".join(kept)


def _portable(data: bytes, root: Path | None) -> bytes:
    """Sandbox paths as ``/sandbox``, also in the slug form Claude Code names folders with."""
    if root is None:
        return data
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(root)).encode()
    return data.replace(str(root).encode(), b"/sandbox").replace(slug, b"-sandbox")
