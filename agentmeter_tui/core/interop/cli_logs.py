"""A CLI's own output, read through our adapter's parser into importable events.

Used where a Harbor trial has no ATIF trajectory but its installed agent left the CLI's log
in ``agent/`` (Claude Code's stream-json in ``claude-code.txt``, ...): the same parser that
reads a live trial reads the file, so tokens follow the CLI's real semantics.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..harnesses import ADAPTERS, get_adapter
from ..harnesses.base import StreamParser
from ..usage import TokenUsage
from ..vocab import EventKind, ParsedEvent
from .atif_read import ImportedEvent, split_tool_key


def imported(event: ParsedEvent, ts: float | None = None) -> ImportedEvent:
    """One parsed event as an imported one; a tool call keeps its name and arguments."""
    meta: dict[str, Any] | None = None
    if event.kind == EventKind.TOOL_CALL and event.tool_key:
        name, arguments = split_tool_key(event.tool_key, event.tool_name)
        meta = {"tool_name": name, "arguments": arguments}
    elif event.is_error:
        meta = {"is_error": True}
    return ImportedEvent(event.kind, event.text, ts, meta, event.usage, None, event.model)


def parse_log(cli: str, lines: Iterable[bytes], stream: str = "stdout") -> tuple[list[ImportedEvent], StreamParser]:
    """Events of a CLI's stdout log and the parser that read it (its totals and errors)."""
    parser = get_adapter(cli).new_parser()
    events = [imported(e) for line in lines if line.strip() for e in parser.feed(stream, line)]
    return events, parser


def has_parser(cli: str) -> bool:
    return cli in ADAPTERS


def total(events: Iterable[ImportedEvent]) -> TokenUsage:
    return sum((e.usage for e in events if e.usage is not None), TokenUsage())
