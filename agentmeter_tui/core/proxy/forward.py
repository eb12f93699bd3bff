"""What the proxy needs to know of an HTTP request and answer beyond its protocol: the
headers and query to pass on (with the caller's key swapped for the real one in the same
place) and a provider's error answer as recorded per call. Which protocol a path speaks,
where its model and key are and its error shape are the protocol's (``core/wire/``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import orjson
from multidict import CIMultiDict


# Never forwarded in either direction: they describe one hop, not the message.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "host", "content-length"})


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
