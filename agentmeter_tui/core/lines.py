"""Splitting an agent's byte stream into lines, with a cap on line length.

Agents print anything: binary, invalid UTF-8, a 10 MiB line. Lines are kept as bytes (so
nothing is decoded wrongly or dropped); a line longer than ``MAX_LINE`` is stored truncated,
its first ``MAX_LINE`` bytes followed by a marker saying how much was cut, and the rest is
discarded as it arrives so memory stays bounded.
"""

from __future__ import annotations

MAX_LINE = 1 << 20  # 1 MiB
TRUNCATION_MARKER = b" [agentmeter: line truncated, %d bytes dropped]"


class LineSplitter:
    __slots__ = ("_buffer", "_dropped", "max_line")

    def __init__(self, max_line: int = MAX_LINE):
        self._buffer = bytearray()
        self._dropped = 0
        self.max_line = max_line

    def feed(self, chunk: bytes) -> list[bytes]:
        if not self._buffer and not self._dropped and chunk.endswith(b"\n") and len(chunk) <= self.max_line:
            # The common case: whole lines in one read; one split, no copying into the buffer.
            return chunk[:-1].split(b"\n")
        lines: list[bytes] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._append(chunk[start:])
                return lines
            self._append(chunk[start:end])
            lines.append(self._take())
            start = end + 1

    def flush(self) -> list[bytes]:
        """The unterminated last line at end of stream, if any."""
        if self._buffer or self._dropped:
            return [self._take()]
        return []

    def _append(self, piece: bytes) -> None:
        room = self.max_line - len(self._buffer)
        if len(piece) <= room:
            self._buffer += piece
        else:
            self._buffer += piece[:room]
            self._dropped += len(piece) - room

    def _take(self) -> bytes:
        line = bytes(self._buffer)
        if self._dropped:
            line += TRUNCATION_MARKER % self._dropped
        self._buffer.clear()
        self._dropped = 0
        return line
