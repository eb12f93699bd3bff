"""Codex's session store: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``, one record per
line: ``session_meta`` (id, cwd, CLI version), ``turn_context`` (model), ``response_item``
(messages, reasoning, function calls and their output), ``event_msg`` and
``token_usage_record`` (one per model response: its usage)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import orjson

from ...harnesses.codex import codex_usage
from ...harnesses.jsonl import content_text, tool_arguments, tool_text
from ...vocab import EventKind
from .base import CliSession, SessionReader, SessionSource, parse_ts, read_lines


class CodexSessions(SessionReader):
    cli = "codex"
    home_path = ".codex/sessions"
    layout = "YYYY/MM/DD/rollout-*.jsonl"

    @classmethod
    def default_root(cls, home: Path | None = None) -> Path:
        """Codex honours ``$CODEX_HOME`` (when no other home is given)."""
        if home is None and os.environ.get("CODEX_HOME"):
            return Path(os.environ["CODEX_HOME"]) / "sessions"
        return super().default_root(home)

    def sources(self, root: Path) -> Iterator[SessionSource]:
        for path in sorted(root.glob("*/*/*/rollout-*.jsonl")):
            # The file name ends with the session id (a UUID of five dash-separated groups).
            yield SessionSource("-".join(path.stem.split("-")[-5:]), [path], root)

    def read(self, source: SessionSource) -> CliSession:
        session = CliSession()
        model = None
        for _number, line, obj in read_lines(source.files[0], source.data):
            if obj is None:
                session.add(EventKind.RAW, line.decode("utf-8", "replace")[:2000])
                continue
            kind, ts = obj.get("type"), parse_ts(obj.get("timestamp"))
            payload = sub if isinstance(sub := obj.get("payload"), dict) else {}
            session.seen(ts)
            if kind == "session_meta":
                session.project = payload.get("cwd")
                session.version = payload.get("cli_version")
            elif kind == "turn_context":
                model = payload.get("model") or model
                session.model = session.model or model
            elif kind == "token_usage_record" and isinstance(payload.get("usage"), dict):
                call_id = str(payload.get("response_id") or f"#{len(session.events)}")
                session.call(call_id, codex_usage(payload["usage"]), ts, model)
            elif kind == "response_item":
                self._item(session, payload, ts, model)
            elif kind == "event_msg" and payload.get("type") in ("error", "stream_error"):
                session.add(EventKind.ERROR, str(payload.get("message") or ""), ts)
                session.errors.append(str(payload.get("message") or "error")[:200])
        return session

    def _item(self, session: CliSession, item: dict, ts: float | None, model: str | None) -> None:
        kind = item.get("type")
        if kind == "message":
            text = content_text([{"text": p.get("text")} for p in item.get("content") or [] if isinstance(p, dict)])
            if item.get("role") == "assistant":
                session.add(EventKind.ASSISTANT, text, ts, model=model)
            elif item.get("role") == "user" and not text.startswith("<environment_context>"):
                session.add(EventKind.SYSTEM, f"user: {text}", ts)
        elif kind == "reasoning":
            summary = [p.get("text") or "" for p in item.get("summary") or [] if isinstance(p, dict)]
            session.add(EventKind.REASONING, "\n".join(summary), ts, model=model)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            raw = item.get("arguments") if kind == "function_call" else item.get("input") or item.get("action")
            args = tool_arguments(raw)
            session.add(EventKind.TOOL_CALL, tool_text(args), ts,
                        {"tool_name": str(item.get("name") or kind), "arguments": args, "call_id": item.get("call_id")},
                        model)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            text = output if isinstance(output, str) else orjson.dumps(output).decode()
            session.add(EventKind.TOOL_RESULT, text, ts, {"call_id": item.get("call_id")})
