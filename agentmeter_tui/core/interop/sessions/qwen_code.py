"""Qwen Code's session store: ``~/.qwen/projects/<cwd-slug>/chats/<session>.jsonl``: ``user``,
``assistant`` (Gemini-shaped ``parts`` with ``thought`` text and ``functionCall``),
``tool_result`` (``functionResponse``) and ``system`` telemetry records. Usage is the assistant
record's ``usageMetadata`` (the prompt includes the cache; thoughts stay inside output, as on
Qwen Code's stdout)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from ...harnesses.jsonl import as_int, tool_arguments, tool_text
from ...usage import TokenUsage
from ...vocab import EventKind
from .base import CliSession, SessionReader, SessionSource, parse_ts, read_lines


def parts_events(session: CliSession, parts: object, ts: float | None, model: str | None, user: bool) -> None:
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            if part.get("thought"):
                session.add(EventKind.REASONING, part["text"], ts, model=model)
            elif user:
                session.add(EventKind.SYSTEM, f"user: {part['text']}", ts)
            else:
                session.add(EventKind.ASSISTANT, part["text"], ts, model=model)
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            name, args = str(call.get("name") or "?"), call.get("args") or {}
            session.add(EventKind.TOOL_CALL, tool_text(args), ts,
                        {"tool_name": name, "arguments": tool_arguments(args),
                         "call_id": call.get("id")}, model)
        elif isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"].get("response")
            output = response.get("output") if isinstance(response, dict) else None
            text = output if isinstance(output, str) else orjson.dumps(response).decode()
            session.add(EventKind.TOOL_RESULT, text, ts, {"call_id": part["functionResponse"].get("id")})


class QwenCodeSessions(SessionReader):
    cli = "qwen-code"
    home_path = ".qwen/projects"
    layout = "PROJECT/chats/SESSION.jsonl"

    def sources(self, root: Path) -> Iterator[SessionSource]:
        for path in sorted(root.glob("*/chats/*.jsonl")):
            yield SessionSource(path.stem, [path], root)

    def read(self, source: SessionSource) -> CliSession:
        session = CliSession()
        for path in source.files:
            for _number, line, obj in read_lines(path, source.data):
                if obj is None:
                    session.add(EventKind.RAW, line.decode("utf-8", "replace")[:2000])
                    continue
                kind, ts = obj.get("type"), parse_ts(obj.get("timestamp"))
                if kind not in ("user", "assistant", "tool_result"):
                    continue
                session.seen(ts)
                session.project = session.project or obj.get("cwd")
                session.version = session.version or obj.get("version")
                model = obj.get("model")
                session.model = session.model or model
                parts_events(session, (obj.get("message") or {}).get("parts"), ts, model, user=kind == "user")
                meta = obj.get("usageMetadata")
                if kind == "assistant" and isinstance(meta, dict):
                    prompt, cached = as_int(meta.get("promptTokenCount")), as_int(meta.get("cachedContentTokenCount"))
                    usage = TokenUsage(uncached_input=max(0, prompt - cached), cached_input=cached,
                                       output=as_int(meta.get("candidatesTokenCount")))
                    session.call(str(obj.get("uuid") or len(session.events)), usage, ts, model)
        return session
