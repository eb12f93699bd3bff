"""Reading a model call's usage off its response bytes as they pass through the proxy.

A :class:`UsageScanner` is fed every chunk of one response, in order, and never changes a
byte. It finds the SSE frames that may carry usage or an error; the response's protocol
(``core/wire/``) says where in them its usage is and what the numbers mean.

An error inside a 200 stream (Anthropic's ``event: error``, a chat chunk with ``error``,
``response.failed``) is kept as ``error``. A call counts only once its final figures are seen, the same rule by which the scripted
model server counts a call as served; figures seen before (the input of a stream that was cut)
are kept as ``partial``, for the record but not the meter.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import orjson

from ..usage import TokenUsage
from ..wire import get_protocol

MAX_JSON_BODY = 32 << 20  # a non-streaming answer larger than this is passed on unread
_USAGE_MARK = b'"usage'  # every usage-bearing frame has "usage..." or "usageMetadata" in it
_ERROR_MARK = b'"error'  # and every in-stream error frame has "error..." (a false hit costs one parse)


# DeepSeek, DashScope and OpenAI put "usage":null in every chunk and Responses "error":null in
# its snapshots: a mark counts only where it is not such a null (C-level counts, no copies), so
# those frames are never parsed.
_NULL_USAGE = (b'"usage":null', b'"usage": null')
_NULL_ERROR = (b'"error":null', b'"error": null')


def _has_mark(data: bytes) -> bool:
    usage = data.count(_USAGE_MARK)
    if usage and usage > data.count(_NULL_USAGE[0]) + data.count(_NULL_USAGE[1]):
        return True
    errors = data.count(_ERROR_MARK)
    return bool(errors) and errors > data.count(_NULL_ERROR[0]) + data.count(_NULL_ERROR[1])


def stream_error(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The error an in-stream frame reports, as {type, message}, or None."""
    error = obj.get("error")
    if obj.get("type") in ("response.failed", "error") and isinstance(obj.get("response"), Mapping):
        error = obj["response"].get("error") or error
    if isinstance(error, Mapping):
        kind = error.get("type") or error.get("status") or error.get("code")
        return {"type": None if kind is None else str(kind), "message": str(error.get("message") or "")[:500]}
    if isinstance(error, str) and error:
        return {"type": None, "message": error[:500]}
    return None


class UsageScanner:
    """Usage of one response of ``protocol``. ``feed`` returns True when the final figures
    changed, so the caller can meter the difference before the chunk reaches the client."""

    def __init__(self, protocol: str, content_type: str = "", content_encoding: str = ""):
        self.protocol = protocol
        self.wire = get_protocol(protocol)
        self.sse = "text/event-stream" in content_type.lower()
        self.final: TokenUsage | None = None
        self._partial: TokenUsage | None = None
        self._running: bytes | None = None  # the last running-totals frame (Gemini), parsed only if needed
        self.unreadable: str | None = None  # why the usage could not be read, if so
        self.charged: Decimal | None = None  # what the provider says it charged (OpenRouter's cost)
        self.error: dict[str, Any] | None = None  # an error reported inside a 2xx answer
        self._buf = bytearray()
        self._data: list[bytes] = []  # data lines of the SSE event being read
        self.memo: dict[str, Any] = {}  # what the protocol keeps between frames (Anthropic's message_start)
        self._changed = False
        encoding = content_encoding.lower().strip()
        self._inflate = zlib.decompressobj(47) if encoding in ("gzip", "deflate", "x-gzip") else None
        if encoding not in ("", "identity", "gzip", "deflate", "x-gzip"):
            self.unreadable = f"content-encoding {encoding}"

    @property
    def partial(self) -> TokenUsage | None:
        """What was seen of a call whose final figures were not (Anthropic's input, Gemini's
        last running totals)."""
        if self._running is not None:
            running, self._running = self._running, None
            try:
                obj = orjson.loads(running)
            except orjson.JSONDecodeError:
                obj = None
            if isinstance(obj, dict):
                self.wire.frame(self, obj)
        return self._partial

    # -- input ---------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> bool:
        if self.unreadable:
            return False
        if self._inflate is not None:
            try:
                chunk = self._inflate.decompress(chunk)
            except zlib.error as exc:
                self.unreadable = f"bad compressed body: {exc}"
                return False
        self._changed = False
        if self.sse:
            self._feed_sse(chunk)
        elif len(self._buf) + len(chunk) <= MAX_JSON_BODY:
            self._buf += chunk
        else:
            self.unreadable, self._buf = "body too large to read", bytearray()
        return self._changed

    def finish(self, clean: bool = True) -> bool:
        """The response ended (``clean``: completely). Returns True when the final figures changed."""
        self._changed = False
        if self.unreadable:
            return False
        if self.sse:
            if clean:
                for line in bytes(self._buf).split(b"\n"):  # a last event without its blank line
                    self._line(line)
                self._dispatch()
                if self.final is None and self.wire.totals_at_end and self.partial is not None:
                    self.set_final(self.partial)  # its last running figures are the totals
        elif clean and self._buf:
            try:
                self.wire.whole(self, orjson.loads(self._buf))
            except orjson.JSONDecodeError:
                self.unreadable = "body is not JSON"
        self._buf = bytearray()
        return self._changed

    def _feed_sse(self, chunk: bytes) -> None:
        # Only whole events are looked at, and only those with a usage mark are parsed line by
        # line: a long text stream costs two C-level searches per chunk, not a Python loop per frame.
        self._buf += chunk
        lf, crlf = self._buf.rfind(b"\n\n"), self._buf.rfind(b"\r\n\r\n")
        end = max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)
        if not end:
            return
        complete = bytes(self._buf[:end])
        del self._buf[:end]
        if _has_mark(complete):
            for line in complete.split(b"\n"):
                self._line(line)

    def _line(self, line: bytes) -> None:
        line = line.rstrip(b"\r")
        if not line:
            self._dispatch()
        elif line.startswith(b"data:"):
            self._data.append(line[5:].lstrip())

    def _dispatch(self) -> None:
        data, self._data = self._data, []
        if not data:
            return
        payload = data[0] if len(data) == 1 else b"\n".join(data)
        if not _has_mark(payload):
            return  # most frames: text deltas with nothing to read
        if self.wire.holds_running_totals(payload):
            self._running = payload  # running totals repeated in every chunk: only the last one counts
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if isinstance(obj, dict):
            self._frame(obj)

    # -- what the protocol reports --------------------------------------------------------------

    def set_final(self, usage: TokenUsage) -> None:
        """The call's final figures (they may come again, larger, later in the stream)."""
        if usage != self.final:
            self.final, self._changed = usage, True

    def set_partial(self, usage: TokenUsage) -> None:
        """Figures seen before the final ones: kept for the record, not the meter."""
        self._partial, self._running = usage, None

    def _frame(self, obj: dict[str, Any]) -> None:
        error = stream_error(obj)
        if error is not None:
            self.error = error
        self.wire.frame(self, obj)
