"""Small helpers the JSON-lines adapters share: decoding one line, the thrash detector's tool
key, the text of a content block list, and scanning a session file for usage records."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson


def load_object(line: bytes) -> dict | None:
    """The JSON object on this line, or None (not JSON, or JSON that is not an object)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def tool_key(name: str, arguments: Any) -> str:
    """Name plus canonical arguments: the same call twice gives the same key."""
    try:
        canonical = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        canonical = repr(arguments)
    return f"{name}:{canonical}"


def tool_arguments(raw: Any) -> dict:
    """A tool call's arguments as a dict: JSON text decoded; anything else kept under ``input``."""
    try:
        value = orjson.loads(raw) if isinstance(raw, str) else raw
    except orjson.JSONDecodeError:
        value = raw
    return value if isinstance(value, dict) else {"input": value}


def tool_text(arguments: Any) -> str:
    """What a transcript shows for a tool call: the shell command when there is one."""
    if isinstance(arguments, dict):
        for field in ("command", "cmd"):
            if isinstance(arguments.get(field), str):
                return arguments[field]
    try:
        return orjson.dumps(arguments).decode()
    except TypeError:
        return repr(arguments)


def content_text(content: Any) -> str:
    """Text of a message content: a string, or a list of blocks with ``text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [block.get("text") or "" for block in content if isinstance(block, dict)]
        return "\n".join(part for part in parts if part)
    return "" if content is None else str(content)


def objects(files: dict[str, bytes], needles: Iterable[bytes] = ()) -> Iterator[tuple[str, dict]]:
    """(file name, object) for each JSON line of each file, in name order; with ``needles``, only
    lines containing one of them are decoded (session files are large, usage lines are few)."""
    wanted = tuple(needles)
    for name in sorted(files):
        for line in files[name].splitlines():
            if wanted and not any(needle in line for needle in wanted):
                continue
            obj = load_object(line)
            if obj is not None:
                yield name, obj


def as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
