"""Provides :class:`TranscriptTail`: the bounded, streaming transcript of a live pane.

Like Textual's ``Log`` (plain lines, ``max_lines``, sticky tail) but each line carries the
event kind, drawn with a component style, so assistant text, tool calls and errors read
apart at a glance. Writes come in batches (one per feed tick); only visible lines are
rendered, and strips are cached until the lines or the theme change.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..format import KIND_GLYPH, event_summary

KIND_CLASS = {
    "assistant": "tail--assistant", "reasoning": "tail--reasoning", "tool_call": "tail--tool",
    "tool_result": "tail--result", "error": "tail--error", "usage": "tail--usage", "system": "tail--system",
    "status": "tail--status", "raw": "tail--system",
}
MULTILINE = frozenset({"assistant", "error", "status"})  # kinds worth more than one line in a tail
MAX_EVENT_LINES = 4
LINE_CHARS = 300


def event_lines(kind: str, text: str) -> list[str]:
    """The tail lines for one event: tool calls and results folded to one line, text trimmed."""
    if kind in MULTILINE:
        lines = [line for line in (text or "").strip("\n").split("\n") if line.strip()][:MAX_EVENT_LINES]
        return [line[:LINE_CHARS] for line in lines] or [""]
    return [event_summary(kind, text or "", LINE_CHARS)]


class TranscriptTail(ScrollView, can_focus=False):
    COMPONENT_CLASSES = {"tail--gutter", *KIND_CLASS.values()}
    DEFAULT_CSS = """
    TranscriptTail { overflow-x: hidden; }
    """

    def __init__(self, max_lines: int = 300, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self._lines: deque[tuple[str, str, bool]] = deque()  # (kind, text, first line of its event)
        self._dropped = 0  # lines pruned from the top so far (keeps cache keys stable)
        self._cache: LRUCache[tuple[int, int], Strip] = LRUCache(512)
        self.follow = True  # stick to the newest line until the reader scrolls up

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def write_events(self, rows: Iterable[list]) -> None:
        """Append feed rows ``[seq, ts, kind, stream, text]`` and keep the view at the end."""
        added = 0
        for row in rows:
            kind = row[2]
            for n, line in enumerate(event_lines(kind, row[4])):
                self._lines.append((kind, line, n == 0))
                added += 1
        if not added:
            return
        excess = len(self._lines) - self.max_lines
        for _ in range(max(0, excess)):
            self._lines.popleft()
        if excess > 0:
            self._dropped += excess
        self.virtual_size = Size(self.size.width, len(self._lines))
        if self.follow:
            # After the next layout: the new virtual size is what the end is measured against.
            self.scroll_end(animate=False, immediate=False, x_axis=False)
        self.refresh()

    def _on_mouse_scroll_up(self, event) -> None:
        super()._on_mouse_scroll_up(event)
        self.follow = False

    def _on_mouse_scroll_down(self, event) -> None:
        super()._on_mouse_scroll_down(event)
        self.call_after_refresh(self._check_follow)

    def _check_follow(self) -> None:
        self.follow = self.scroll_y >= self.max_scroll_y - 1

    def clear(self) -> None:
        self._dropped += len(self._lines)
        self._lines.clear()
        self.virtual_size = Size(self.size.width, 0)
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        index = int(self.scroll_offset.y) + y
        if index >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        key = (index + self._dropped, width)
        strip = self._cache.get(key)
        if strip is None:
            kind, text, first = self._lines[index]
            style = self.get_component_rich_style(KIND_CLASS.get(kind, "tail--system"))
            gutter = self.get_component_rich_style("tail--gutter")
            glyph = KIND_GLYPH.get(kind, " ") if first else " "
            segments = [Segment(f"{glyph} ", gutter + Style(color=style.color)), Segment(text, style)]
            strip = Strip(segments).crop_extend(0, width, self.rich_style)
            self._cache[key] = strip
        return strip
