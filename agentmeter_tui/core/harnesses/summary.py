"""A saved agent CLI stream read the way the runner reads a live one.

:func:`summarize` feeds the lines of a CLI's stdout to its adapter's parser, takes the usage
in that CLI's session files where it shows more (the same rule as after a kill), and returns
what a trial would record: the five token classes, turns, tool calls, the CLI's own cost,
its error verdict and the events by kind. ``agentmeter transcript parse`` prints it; it only
uses the adapter interface, so it works for every registered CLI.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..usage import TokenUsage
from .base import AgentOutcome, HarnessAdapter

SESSION_LIMIT = 256 << 20  # bytes of session files read at most


@dataclass
class TranscriptSummary:
    cli: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    turns: int = 0
    tool_calls: int = 0
    reported_cost_usd: Decimal | None = None
    outcome: AgentOutcome = field(default_factory=lambda: AgentOutcome(False))
    final_seen: bool = False
    events: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    usage_source: str = "stdout"  # "stdout", "session", or "stdout+session"

    def as_json(self) -> dict[str, Any]:
        return {"cli": self.cli, "tokens": self.usage.as_dict(), "turns": self.turns, "tool_calls": self.tool_calls,
                "reported_cost_usd": None if self.reported_cost_usd is None else float(self.reported_cost_usd),
                "is_error": self.outcome.errored, "error": self.outcome.error, "final_seen": self.final_seen,
                "usage_source": self.usage_source, "events": dict(sorted(self.events.items()))}


def summarize(adapter: HarnessAdapter, lines: Iterable[bytes], session_files: dict[str, bytes] | None = None, *,
              exit_code: int | None = None, killed: bool = False) -> TranscriptSummary:
    """Totals are summed from the events, as the trial runtime sums them."""
    parser = adapter.new_parser()
    summary = TranscriptSummary(adapter.name)
    for line in lines:
        summary.lines += 1
        for event in parser.feed("stdout", line):
            _count(summary, event)
    if session_files:
        recovery = adapter.recover(session_files)
        recovered = parser.absorb(recovery) if recovery is not None else None
        if recovered is not None:
            summary.usage_source = "stdout+session" if summary.usage else "session"
            _count(summary, recovered)
    summary.reported_cost_usd = parser.reported_cost_usd
    summary.final_seen = parser.final_seen
    summary.outcome = parser.outcome(exit_code, killed)
    return summary


def _count(summary: TranscriptSummary, event) -> None:
    summary.events[str(event.kind)] += 1
    if event.usage is not None:
        summary.usage = summary.usage + event.usage
        summary.turns += event.turns
    if event.tool_key is not None:
        summary.tool_calls += 1


def session_files(adapter: HarnessAdapter, path: Path) -> dict[str, bytes]:
    """A session file as given, or the CLI's session files in a HOME folder (by the adapter's
    ``session_globs``); a folder that matches none of them (say the CLI's own state folder)
    gives every ``*.jsonl`` / ``*.json`` file under it."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    found = [p for pattern in adapter.session_globs for p in sorted(path.glob(pattern))]
    if not found:
        found = sorted(p for suffix in ("*.jsonl", "*.json") for p in path.rglob(suffix))
    files: dict[str, bytes] = {}
    total = 0
    for file in found:
        if not file.is_file() or str(file.relative_to(path)) in files:
            continue
        total += file.stat().st_size
        if total > SESSION_LIMIT:
            break
        files[str(file.relative_to(path))] = file.read_bytes()
    return files
