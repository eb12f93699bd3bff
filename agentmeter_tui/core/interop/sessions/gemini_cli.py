"""Gemini CLI's session store: ``~/.gemini/tmp/<project>/chats/session-*.jsonl`` (a header
record, then ``user`` / ``gemini`` message records and ``$set`` updates), or a whole
``session-*.json`` from older versions. A ``gemini`` record is written again under the same
id once its tool calls are done: the last copy is the message, and the call counts once.
``~/.gemini/projects.json`` maps project folders to those names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from ...harnesses.gemini_cli import record_usage
from ...harnesses.jsonl import tool_text
from ...vocab import EventKind
from ..walls import read_under
from .base import BadSession, CliSession, SessionReader, SessionSource, parse_ts, read_lines
from .qwen_code import parts_events


class GeminiCliSessions(SessionReader):
    cli = "gemini-cli"
    home_path = ".gemini/tmp"
    layout = "PROJECT/chats/session-*.jsonl"

    def sources(self, root: Path) -> Iterator[SessionSource]:
        for path in sorted([*root.glob("*/chats/*.jsonl"), *root.glob("*/chats/*.json")]):
            yield SessionSource(path.stem, [path], root)

    def _projects(self, root: Path) -> dict[str, str]:
        try:
            data = orjson.loads(read_under(root.parent, root.parent / "projects.json"))
        except (OSError, orjson.JSONDecodeError):
            return {}
        projects = data.get("projects") if isinstance(data, dict) else None
        return {str(name): str(path) for path, name in (projects or {}).items()}

    def _records(self, path: Path, keep: dict[Path, bytes]) -> Iterator[tuple[dict | None, bytes]]:
        if path.suffix == ".json":
            try:
                data = orjson.loads(keep[path] if path in keep else path.read_bytes())
            except orjson.JSONDecodeError as exc:
                raise BadSession(str(path), f"not valid JSON ({exc})") from None
            for record in (data.get("messages") if isinstance(data, dict) else None) or []:
                yield (record if isinstance(record, dict) else None), b""
            return
        for _number, line, obj in read_lines(path, keep):
            if obj is not None and isinstance(obj.get("$set"), dict):
                for record in obj["$set"].get("messages") or []:
                    yield (record if isinstance(record, dict) else None), b""
            elif obj is None or "type" in obj:
                yield obj, line

    def read(self, source: SessionSource) -> CliSession:
        session = CliSession()
        path = source.files[0]
        session.project = self._projects(source.root).get(path.parent.parent.name, path.parent.parent.name)
        records: dict[str, dict | str] = {}  # id -> last copy, in first-seen order; a raw line as text
        for obj, line in self._records(path, source.data):
            if obj is None:
                if line:
                    records[f"#raw{len(records)}"] = line.decode("utf-8", "replace")[:2000]
                continue
            key = str(obj.get("id") or f"#{len(records)}")
            seen = records.get(key)
            records[key] = {**seen, **obj} if isinstance(seen, dict) else obj
        for key, record in records.items():
            if isinstance(record, str):
                session.add(EventKind.RAW, record)
            else:
                self._record(session, key, record)
        return session

    def _record(self, session: CliSession, key: str, record: dict) -> None:
        kind, ts = record.get("type"), parse_ts(record.get("timestamp"))
        session.seen(ts)
        if kind == "user":
            content = record.get("content")
            if isinstance(content, str):
                session.add(EventKind.SYSTEM, f"user: {content}", ts)
            else:
                parts_events(session, content, ts, None, user=True)
            return
        if kind != "gemini":
            if kind in ("error", "warning", "info"):
                session.add(EventKind.ERROR if kind == "error" else EventKind.SYSTEM,
                            f"{kind}: {record.get('content')}", ts)
                if kind == "error":
                    session.errors.append(str(record.get("content"))[:200])
            return
        model = record.get("model")
        session.model = session.model or model
        thoughts = [t.get("description") or "" for t in record.get("thoughts") or [] if isinstance(t, dict)]
        if thoughts:
            session.add(EventKind.REASONING, "".join(thoughts), ts, model=model)
        if record.get("content"):
            text = record["content"] if isinstance(record["content"], str) else orjson.dumps(record["content"]).decode()
            session.add(EventKind.ASSISTANT, text, ts, model=model)
        if isinstance(record.get("tokens"), dict):
            session.call(key, record_usage(record["tokens"]), ts, model)
        for call in record.get("toolCalls") or []:
            if isinstance(call, dict):
                args = call.get("args") if isinstance(call.get("args"), dict) else {"input": call.get("args")}
                session.add(EventKind.TOOL_CALL, tool_text(args), ts,
                            {"tool_name": str(call.get("name") or "?"), "arguments": args, "call_id": call.get("id")},
                            model)
