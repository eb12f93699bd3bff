"""Claude Code's session store: ``~/.claude/projects/<cwd-slug>/<session>.jsonl``, one JSON
record per line (``user``, ``assistant``, and bookkeeping records we skip), subagents in
``<session>/subagents/*.jsonl``. An API call's assistant message is written once per content
block, each copy with the call's usage: the call counts once (its message id)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ...harnesses.claude_code import SYNTHETIC, ClaudeCodeParser, block_events, user_events
from ...vocab import EventKind
from ...wire.anthropic import from_anthropic
from ..cli_logs import imported
from .base import CliSession, SessionReader, SessionSource, parse_ts, read_lines


class ClaudeCodeSessions(SessionReader):
    cli = "claude-code"
    home_path = ".claude/projects"
    layout = "PROJECT/SESSION.jsonl"

    def sources(self, root: Path) -> Iterator[SessionSource]:
        for path in sorted(root.glob("*/*.jsonl")):
            subagents = sorted((path.parent / path.stem / "subagents").glob("*.jsonl"))
            yield SessionSource(path.stem, [path, *subagents], root)

    def read(self, source: SessionSource) -> CliSession:
        session = CliSession()
        counter = ClaudeCodeParser()  # counts tool calls for block_events
        last_usage: dict[str, dict] = {}  # message id -> the usage record last read (copies repeat it)
        for path in source.files:
            for _number, line, obj in read_lines(path, source.data):
                if obj is None:
                    session.add(EventKind.RAW, line.decode("utf-8", "replace")[:2000])
                    continue
                kind, ts = obj.get("type"), parse_ts(obj.get("timestamp"))
                if kind not in ("user", "assistant"):
                    continue
                session.seen(ts)
                session.project = session.project or obj.get("cwd")
                session.version = session.version or obj.get("version")
                message = sub if isinstance(sub := obj.get("message"), dict) else {}
                if kind == "user":
                    for event in user_events(obj):
                        session.events.append(imported(event, ts))
                    continue
                model = message.get("model")
                if model and model != SYNTHETIC:
                    session.model = session.model or model
                for event in block_events(counter, message.get("content"), model):
                    session.events.append(imported(event, ts))
                if obj.get("error") or model == SYNTHETIC:
                    session.add(EventKind.ERROR, f"API error: {obj.get('error') or 'synthetic message'}", ts)
                    session.errors.append(str(obj.get("error") or "API error"))
                usage, message_id = message.get("usage"), message.get("id")
                if isinstance(usage, dict) and message_id and model != SYNTHETIC and last_usage.get(message_id) != usage:
                    last_usage[message_id] = usage
                    session.call(str(message_id), from_anthropic(usage), ts, model)
        return session
