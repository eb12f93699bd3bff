"""Kimi CLI's session store: ``~/.kimi/sessions/<md5 of the work dir>/<session>/wire.jsonl``,
its wire protocol logged one message per line (``{"timestamp", "message": {"type",
"payload"}}``): ``TurnBegin`` (the user's input), ``ContentPart`` (text, think), ``ToolCall``,
``ToolResult``, ``StatusUpdate`` (a call's ``token_usage``; a later update of the same
``message_id`` replaces the earlier). ``~/.kimi/kimi.json`` lists the work dirs, and
``config.toml`` names the model; the wire log names neither."""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Iterator
from pathlib import Path

import orjson

from ...harnesses.jsonl import tool_arguments, tool_text
from ...harnesses.kimi_cli import wire_usage
from ...vocab import EventKind
from ..walls import read_under
from .base import CliSession, SessionReader, SessionSource, parse_ts, read_lines


class KimiCliSessions(SessionReader):
    cli = "kimi-cli"
    home_path = ".kimi/sessions"
    layout = "WORKDIR-MD5/SESSION/wire.jsonl"

    def sources(self, root: Path) -> Iterator[SessionSource]:
        for path in sorted(root.glob("*/*/wire.jsonl")):
            yield SessionSource(path.parent.name, [path], root)

    def _home_facts(self, root: Path) -> tuple[dict[str, str], str | None]:
        dirs: dict[str, str] = {}
        try:
            state = orjson.loads(read_under(root.parent, root.parent / "kimi.json"))
            for entry in state.get("work_dirs") or []:
                path = entry.get("path") if isinstance(entry, dict) else None
                if isinstance(path, str):
                    dirs[hashlib.md5(path.encode()).hexdigest()] = path  # Kimi names the folder so
        except (OSError, orjson.JSONDecodeError, AttributeError):
            pass
        model = None
        try:
            config = tomllib.loads(read_under(root.parent, root.parent / "config.toml").decode())
            name = config.get("default_model")
            model = ((config.get("models") or {}).get(name) or {}).get("model") or name
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
            pass
        return dirs, model

    def read(self, source: SessionSource) -> CliSession:
        dirs, model = self._home_facts(source.root)
        path = source.files[0]
        session = CliSession(project=dirs.get(path.parent.parent.name), model=model)
        for _number, line, obj in read_lines(path, source.data):
            message = obj.get("message") if obj is not None else None
            if obj is None or not isinstance(message, dict):  # not JSON (kept raw), or the protocol header line
                if obj is None:
                    session.add(EventKind.RAW, line.decode("utf-8", "replace")[:2000])
                continue
            ts = parse_ts(obj.get("timestamp"))
            session.seen(ts)
            self._message(session, str(message.get("type")), message.get("payload"), ts, model)
        return session

    def _message(self, session: CliSession, kind: str, payload: object, ts: float | None,
                 model: str | None) -> None:
        payload = payload if isinstance(payload, dict) else {}
        if kind == "TurnBegin":
            user = payload.get("user_input")
            session.add(EventKind.SYSTEM, f"user: {user if isinstance(user, str) else orjson.dumps(user).decode()}", ts)
        elif kind == "ContentPart":
            if payload.get("type") == "think":
                session.add(EventKind.REASONING, str(payload.get("think") or ""), ts, model=model)
            elif payload.get("type") == "text":
                session.add(EventKind.ASSISTANT, str(payload.get("text") or ""), ts, model=model)
        elif kind == "ToolCall":
            function = sub if isinstance(sub := payload.get("function"), dict) else {}
            raw = function.get("arguments")
            args = tool_arguments(raw)
            session.add(EventKind.TOOL_CALL, tool_text(args), ts,
                        {"tool_name": str(function.get("name") or "?"), "arguments": args, "call_id": payload.get("id")},
                        model)
        elif kind == "ToolResult":
            value = sub if isinstance(sub := payload.get("return_value"), dict) else {}
            output = value.get("output")
            text = output if isinstance(output, str) else orjson.dumps(output).decode()
            session.add(EventKind.TOOL_RESULT, text, ts,
                        {"call_id": payload.get("tool_call_id"), "is_error": bool(value.get("is_error"))})
        elif kind == "StatusUpdate" and isinstance(payload.get("token_usage"), dict):
            call_id = str(payload.get("message_id") or f"#{len(session.events)}")
            session.call(call_id, wire_usage(payload["token_usage"]), ts, model)
        elif kind == "StepInterrupted":
            session.add(EventKind.SYSTEM, "step interrupted", ts)
