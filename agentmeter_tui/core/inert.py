"""Agent output made inert for a terminal: every control character shown, none obeyed.

An agent prints whatever its model or its tools produce, and a model can be steered by any
web page or file it reads. Passed to a terminal as is, that output can set the window title
(OSC 0/2), write the operator's clipboard (OSC 52), plant a hyperlink (OSC 8), move the
cursor or clear the screen, switch bracketed paste, or reorder text with bidi overrides. The
store keeps every byte verbatim; everything that shows agent text to a person (the TUI, the
headless printer, the command-line outputs) passes it through :func:`inert` first, which maps
each such character to a visible stand-in of width one:

- C0 controls except newline and tab, as Unicode control pictures (ESC -> ``␛``, NUL -> ``␀``,
  CR -> ``␍``); DEL as ``␡``;
- C1 controls (U+0080-U+009F, 8-bit CSI and OSC among them), bidi embeddings, overrides and
  isolates, and lone surrogates, as ``\\uXXXX`` text.

Rich markup look-alikes (``[bold]``, ``[link=...]``) are a separate matter: they are only
markup where a string is parsed as markup, so agent text is never put into a markup string
unescaped (see ``ui``), and plain text is drawn as plain text.

For JSON written to a file or stdout, :func:`inert_json_bytes` escapes the few characters that
JSON leaves raw (DEL, C1, bidi controls) as ``\\u`` escapes, which keeps the document equal.
"""

from __future__ import annotations

import re

_PICTURES = {code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)}
_PICTURES[0x7F] = "\u2421"
_ESCAPED = [*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]
TABLE: dict[int, str] = {**_PICTURES, **{code: f"\\u{code:04x}" for code in _ESCAPED}}
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _stand_in(match: re.Match) -> str:
    char = match.group()
    return TABLE.get(ord(char)) or f"\\u{ord(char):04x}"  # the rest: lone surrogates


def inert(text: str) -> str:
    """``text`` with every character a terminal would act on replaced by a visible stand-in.
    Callers cut long texts first: the scan is linear (about 25 ms a MiB)."""
    return _UNSAFE.sub(_stand_in, text)


# What JSON leaves raw inside strings, UTF-8 encoded: DEL, C1 (C2 80-9F), ALM (D8 9C), LRM/RLM and the bidi
# embeddings and overrides (E2 80 8E-8F, AA-AE), the isolates (E2 81 A6-A9).
_JSON_UNSAFE_BYTES = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def inert_json_bytes(document: bytes) -> bytes:
    """A UTF-8 JSON document (orjson's output) with the characters JSON leaves raw in strings
    escaped as ``\\uXXXX``: the same document, safe to print (JSON's own syntax is ASCII)."""
    return _JSON_UNSAFE_BYTES.sub(lambda m: f"\\u{ord(m.group().decode()):04x}".encode(), document)
