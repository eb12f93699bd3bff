"""Word wrap for the transcript layout: plain string slicing, not Rich's wrapping, which
renders. A long transcript wraps its events again whenever the view's width changes, and the
layout is tested without Textual."""

from __future__ import annotations


def wrap_line(line: str, width: int) -> list[str]:
    """Greedy word wrap of one line (no newlines) to ``width`` characters; long words are cut."""
    if len(line) <= width:
        return [line]
    out = []
    while len(line) > width:
        cut = line.rfind(" ", 0, width + 1)
        if cut <= 0:
            out.append(line[:width])
            line = line[width:]
        else:
            out.append(line[:cut])
            line = line[cut + 1:]
    out.append(line)
    return out


def wrap_text(text: str, width: int) -> list[str]:
    width = max(8, width)
    text = text.expandtabs(4).rstrip("\n") or ""
    if "\n" not in text:
        return wrap_line(text, width)
    lines: list[str] = []
    for line in text.split("\n"):
        lines.extend(wrap_line(line, width))
    return lines
