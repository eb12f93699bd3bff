"""What every scripted protocol module provides, and the SSE framing they share.

A scripted protocol is the server side of one wire protocol of ``core/wire/`` (whose class
names it in ``scripted``): it reads the offered tools and the streaming flag from a request
body, renders a :class:`~.replies.Reply` as SSE frames (streaming) or one JSON body
(non-streaming), and answers the protocol's side endpoints (token counts, model listings).
Error bodies are the wire protocol's. The aiohttp app (``app.py``) does the rest: sessions,
timing, logging.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from ..wire import get_protocol
from .replies import OfferedTool, Reply


DEFAULT_MODELS = ("scripted-model",)  # what the model listings offer


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def now() -> int:
    return int(time.time())


def count_tokens(raw: bytes) -> int:
    """A deterministic stand-in for a tokenizer: a token per four bytes of request body."""
    return max(1, len(raw) // 4)


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """A model call as a protocol sees it: JSON body, query string and path parameters."""

    body: dict[str, Any]
    query: Mapping[str, str] = field(default_factory=dict)
    match: Mapping[str, str] = field(default_factory=dict)


class ScriptedProtocol:
    """Base class; one subclass per wire protocol, of the same ``name``."""

    name = "protocol"
    sse_headers: ClassVar[dict[str, str]] = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}

    def offered_tools(self, body: dict[str, Any]) -> list[OfferedTool]:
        raise NotImplementedError

    def wanted_json(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The JSON schema the request wants its answer to follow (structured output), if any."""
        return None

    def wants_stream(self, req: ScriptedRequest) -> bool:
        return bool(req.body.get("stream"))

    def model(self, req: ScriptedRequest) -> str:
        return str(req.body.get("model") or "scripted-model")

    def stream(self, reply: Reply, model: str, req: ScriptedRequest) -> list[bytes]:
        raise NotImplementedError

    def complete(self, reply: Reply, model: str, req: ScriptedRequest) -> dict[str, Any]:
        raise NotImplementedError

    def error_body(self, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
        return get_protocol(self.name).error_body(status, message, error_type)

    def path_match(self, path: str) -> dict[str, str]:
        """What a model call's path says besides the protocol (Gemini: model and action)."""
        return {}

    def side_answer(self, method: str, path: str, raw: bytes) -> tuple[str, Any] | None:
        """A side endpoint of the protocol (token counts, listings): (what it answered, body)."""
        return None

    def response_headers(self, reply: Reply | None) -> dict[str, str]:
        return {}
