"""What the proxy needs to know of an HTTP request: which protocol a path speaks, where the
caller put its API key, and how to swap that key for the real one in the same place.

The key is looked for where the four protocols put it (``Authorization: Bearer``,
``x-api-key``, ``x-goog-api-key``, ``api-key``, the ``key`` query parameter), in the same
order as the scripted model server reads it. Error bodies come in the protocol's own shape
(the scripted server's protocol classes render them), so a CLI surfaces a refusal the way it
surfaces any error of its provider.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import orjson
from multidict import CIMultiDict

from ..mockllm.anthropic import AnthropicMessages
from ..mockllm.chat import ChatCompletions
from ..mockllm.gemini import Gemini
from ..mockllm.responses import Responses
from ..mockllm.wire import Protocol

PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (ChatCompletions(), AnthropicMessages(), Responses(), Gemini())}
KEY_HEADERS = ("x-api-key", "x-goog-api-key", "api-key")
# Never forwarded in either direction: they describe one hop, not the message.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "host", "content-length"})


def protocol_for(path: str) -> str | None:
    """The protocol of a model-call path; None for everything else (token counts, model lists)."""
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "anthropic"
    if "/models/" in path and path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini"
    return None


def request_model(protocol: str | None, path: str, body: bytes) -> str | None:
    """The model a call asks for: Gemini names it in the path, the others in the JSON body."""
    if protocol == "gemini":
        return path.rsplit("/models/", 1)[-1].split(":", 1)[0] or None
    try:
        data = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) else None


def find_key(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    auth = headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    for name in KEY_HEADERS:
        if headers.get(name):
            return headers[name]
    return query.get("key") or None


def upstream_headers(headers: Iterable[tuple[str, str]], key: str, real_key: str) -> CIMultiDict[str]:
    """The caller's headers for the upstream: hop-by-hop ones dropped, the proxy key swapped for
    the real one wherever it appears, and an uncompressed answer asked for (so its usage can be
    read; the bytes still pass on as they come)."""
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers:
        lowered = name.lower()
        if lowered in HOP_BY_HOP or lowered == "accept-encoding":
            continue
        if lowered == "authorization" and value[:7].lower() == "bearer " and value[7:].strip() == key:
            value = value[:7] + real_key
        elif value == key:
            value = real_key
        out.add(name, value)
    out["Accept-Encoding"] = "identity"
    return out


def upstream_query(query: Iterable[tuple[str, str]], key: str, real_key: str) -> list[tuple[str, str]]:
    return [(name, real_key if value == key else value) for name, value in query]


def response_headers(headers: Iterable[tuple[str, str]]) -> CIMultiDict[str]:
    return CIMultiDict((name, value) for name, value in headers if name.lower() not in HOP_BY_HOP)


def error_body(protocol: str | None, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
    return PROTOCOLS[protocol or "chat"].error_body(status, message, error_type)


MAX_ERROR_BODY = 64 << 10  # an error answer's body is read for its type up to this size


def retry_after(headers: Mapping[str, str], body: Any = None) -> float | None:
    """Seconds the provider asks to wait: ``retry-after-ms``, ``retry-after`` (seconds or an HTTP
    date), or Gemini's ``RetryInfo.retryDelay`` ("34.4s") in the error body."""
    try:
        if headers.get("retry-after-ms"):
            return round(float(headers["retry-after-ms"]) / 1000, 3)
        value = headers.get("retry-after")
        if value:
            try:
                return max(0.0, float(value))
            except ValueError:
                return max(0.0, round(parsedate_to_datetime(value).timestamp() - time.time(), 3))
    except (TypeError, ValueError, OverflowError):
        pass
    error = body.get("error") if isinstance(body, Mapping) else None
    for detail in (error.get("details") or []) if isinstance(error, Mapping) else []:
        delay = detail.get("retryDelay") if isinstance(detail, Mapping) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return float(delay[:-1])
            except ValueError:
                return None
    return None


def read_error(status: int, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """A provider's error answer as recorded per call: status, type, message, retry-after.
    The type is the provider's own word for it (``overloaded_error``, ``rate_limit_exceeded``,
    ``RESOURCE_EXHAUSTED``), else the status."""
    try:
        data = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    kind = message = None
    if isinstance(error, Mapping):
        kind = error.get("type") or error.get("status") or error.get("code")
        message = error.get("message")
    elif isinstance(data, dict):
        kind, message = data.get("type"), data.get("message")
    return {"status": status, "type": str(kind) if kind is not None else f"http {status}",
            "message": str(message or "")[:500], "retry_after": retry_after(headers, data)}
