"""opencode's session store: the SQLite file ``~/.local/share/opencode/opencode.db`` (opencode
1.18): ``session`` rows (work dir, version, times), ``message`` rows (an assistant message is
one model call: ``tokens`` with the same meaning as on stdout, ``cost`` from the configured
prices, ``modelID``) and ``part`` rows (text, reasoning, tool with its input and output).
opencode has no session files for the runner to recover usage from, so the totals are the sum
of the messages' tokens (a call cut off by a kill is stored with zeros)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import orjson

from ...harnesses.jsonl import tool_text
from ...harnesses.opencode import step_usage
from ...usage import TokenUsage
from ...vocab import EventKind
from ..walls import Refused, check
from .base import BadSession, CliSession, SessionReader, SessionSource, parse_ts

DB = "opencode.db"


def _json(text: str) -> dict:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class OpencodeSessions(SessionReader):
    cli = "opencode"
    home_path = ".local/share/opencode"
    layout = "opencode.db"
    reads_files = False

    def __init__(self) -> None:
        self._rows: dict[str, dict] = {}

    def sources(self, root: Path) -> Iterator[SessionSource]:
        from ...store.opencode_db import opencode_sessions

        db = root / DB if root.is_dir() else root
        try:
            check(os.path.realpath(db.parent), db)  # a link out, a pipe: never opened
        except Refused as exc:
            raise BadSession(exc.where, f"refused: {exc.why}") from None
        try:
            for row in opencode_sessions(db):
                self._rows[row["id"]] = row
                yield SessionSource(row["id"], [db], db.parent)
        except sqlite3.DatabaseError as exc:
            raise BadSession(str(db), f"not a readable opencode store ({exc})") from None

    def totals(self, source: SessionSource, session: CliSession) -> tuple[TokenUsage, int]:
        calls = [e.usage for e in session.events if e.usage is not None]
        # A step cut off by a kill is stored with zeros: not a call whose usage anyone recorded.
        return sum(calls, TokenUsage()), sum(1 for usage in calls if usage)

    def read(self, source: SessionSource) -> CliSession:
        row = self._rows.pop(source.id)
        session = CliSession(project=row.get("directory"), version=row.get("version"))
        session.seen(parse_ts(row.get("time_created")))
        session.seen(parse_ts(row.get("time_updated")))
        parts: dict[str, list[dict]] = {}
        for part in row["parts"]:
            parts.setdefault(part["message_id"], []).append(_json(part["data"]))
        cost = 0.0
        for message in row["messages"]:
            data = _json(message["data"])
            ts = parse_ts(message["time_created"])
            model = data.get("modelID")
            if data.get("role") == "assistant":
                session.model = session.model or model
                cost += float(data.get("cost") or 0)
            for part in parts.get(message["id"], []):
                self._part(session, part, ts, model, user=data.get("role") == "user")
            if data.get("role") == "assistant" and isinstance(data.get("tokens"), dict):
                session.call(message["id"], step_usage(data["tokens"]), ts, model)
            if isinstance(data.get("error"), dict):
                error = data["error"]
                text = str((error.get("data") or {}).get("message") or error.get("name") or "error")
                session.add(EventKind.ERROR, text, ts)
                session.errors.append(text[:200])
        session.cost_usd = cost or None
        return session

    def _part(self, session: CliSession, part: dict, ts: float | None, model: str | None, user: bool) -> None:
        kind = part.get("type")
        if kind == "text":
            text = str(part.get("text") or "")
            if user:
                session.add(EventKind.SYSTEM, f"user: {text}", ts)
            else:
                session.add(EventKind.ASSISTANT, text, ts, model=model)
        elif kind == "reasoning":
            session.add(EventKind.REASONING, str(part.get("text") or ""), ts, model=model)
        elif kind == "tool":
            state = sub if isinstance(sub := part.get("state"), dict) else {}
            args = sub if isinstance(sub := state.get("input"), dict) else {}
            name = str(part.get("tool") or "?")
            session.add(EventKind.TOOL_CALL, tool_text(args), ts,
                        {"tool_name": name, "arguments": args, "call_id": part.get("callID")}, model)
            if state.get("status") in ("completed", "error"):
                output = state.get("output") if state.get("status") == "completed" else state.get("error")
                session.add(EventKind.TOOL_RESULT, str(output or ""), ts,
                            {"call_id": part.get("callID"), "is_error": state.get("status") == "error"})
