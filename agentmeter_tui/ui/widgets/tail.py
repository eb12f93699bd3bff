"""Provides :class:`TranscriptTail`: the bounded, streaming transcript of a live pane.

Like Textual's ``Log`` (plain lines, a line cap, a sticky tail) but each line carries the
event kind, drawn with a component style, so assistant text, tool calls and errors read
apart at a glance. It is a plain Line-API widget rather than a scroll view: its size never
changes as lines arrive, so a batch of new lines repaints the pane and never re-lays out
the screen. The mouse wheel looks back; the view sticks to the newest line until then.
Strips are cached until the lines or the theme change.

A new line moves every line of the pane up, so each batch repaints the whole tail; with a
dozen panes streaming, that repaint is most of a frame. The cached strips are whole lines
already (text, colours, background, full width), so ``render_lines`` hands them to the
compositor itself instead of through Textual's generic styles pass (borders, padding,
opacity), which copied every line of every tail again on every frame. The generic pass still
runs whenever the tail has anything for it to do: a border, padding, tint, text opacity, or a
faded (finished) pane.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from ...core.inert import inert
from ..data import join_fragments
from ..format import KIND_GLYPH, event_summary
from .styling import ComponentStyles

KIND_CLASS = {
    "assistant": "tail--assistant", "reasoning": "tail--reasoning", "tool_call": "tail--tool",
    "tool_result": "tail--result", "error": "tail--error", "usage": "tail--usage", "system": "tail--system",
    "status": "tail--status", "raw": "tail--system",
}
MULTILINE = frozenset({"assistant", "error", "status"})  # kinds worth more than one line in a tail
MAX_EVENT_LINES = 4
LINE_CHARS = 300
WHEEL_LINES = 3


def event_lines(kind: str, text: str) -> list[str]:
    """The tail lines for one event: tool calls and results folded to one line, text trimmed."""
    if kind in MULTILINE:
        lines = [line for line in (text or "").strip("\n").split("\n") if line.strip()][:MAX_EVENT_LINES]
        return [line[:LINE_CHARS] for line in lines] or [""]
    return [event_summary(kind, text or "", LINE_CHARS)]


class TranscriptTail(ComponentStyles, Widget, can_focus=False):
    COMPONENT_CLASSES = {"tail--gutter", "tail--more", *KIND_CLASS.values()}

    def __init__(self, max_lines: int = 300, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self._lines: deque[tuple[str, str, bool]] = deque()  # (kind, text, first line of its event)
        self._dropped = 0  # lines pruned from the top so far (keeps cache keys stable)
        self._cache: LRUCache[tuple[int, int], Strip] = LRUCache(512)
        self.back = 0  # lines scrolled back from the newest; 0 = following the tail
        self._open_text: tuple[int, str] | None = None  # (first line, text) of a trailing assistant event

    @property
    def line_count(self) -> int:
        return len(self._lines)

    @property
    def follow(self) -> bool:
        return self.back == 0

    def write_events(self, rows: Iterable[Sequence]) -> None:
        """Append feed rows ``[seq, ts, kind, stream, text]`` (one batch per feed tick)."""
        added = 0
        merged = False
        for row in rows:
            kind, text = row[2], inert(row[4] or "")  # agent output: shown, never obeyed
            if kind == "assistant" and self._open_text is not None and len(self._open_text[1]) < LINE_CHARS * 4:
                # A streamed message arrives as deltas: grow its lines instead of adding a line each.
                start, previous = self._open_text
                while len(self._lines) > start:
                    self._lines.pop()
                    added -= 1
                text = join_fragments(previous, text)
                merged = True
            start = len(self._lines)
            for n, line in enumerate(event_lines(kind, text)):
                self._lines.append((kind, line, n == 0))
                added += 1
            self._open_text = (start, text) if kind == "assistant" else None
        if merged:
            self._cache.clear()  # the merged message's lines were drawn before with less text
        if not added and not merged:
            return
        excess = len(self._lines) - self.max_lines
        for _ in range(max(0, excess)):
            self._lines.popleft()
        if excess > 0 and self._open_text is not None:
            start = self._open_text[0] - excess
            self._open_text = (start, self._open_text[1]) if start >= 0 else None
        if excess > 0:
            self._dropped += excess
        if self.back:
            # Looking back: keep the same lines on screen while new ones arrive below.
            self.back = min(self.back + added, self._max_back())
        self.refresh()

    def clear(self) -> None:
        self._dropped += len(self._lines)
        self._lines.clear()
        self._open_text = None
        self.back = 0
        self.refresh()

    def _max_back(self) -> int:
        return max(0, len(self._lines) - self.size.height)

    def on_mouse_scroll_up(self, event) -> None:
        self.back = min(self._max_back(), self.back + WHEEL_LINES)
        self.refresh()
        event.stop()

    def on_mouse_scroll_down(self, event) -> None:
        self.back = max(0, self.back - WHEEL_LINES)
        self.refresh()
        event.stop()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def _plain(self) -> bool:
        """Nothing for the generic styles pass to add to a cached line."""
        styles = self.styles
        hatched = styles.has_rule("hatch") and styles.hatch != "none"
        return (not any(styles.gutter) and not any(edge for edge, _ in styles.outline) and not hatched
                and styles.text_opacity == 1 and not styles.tint.a and self.opacity == 1)

    def render_lines(self, crop: Region) -> list[Strip]:
        if not self._plain():
            return super().render_lines(crop)
        _, background = self.background_colors
        filters = self.get_line_filters()
        strips = []
        for y in crop.line_range:
            strip = self.render_line(y)
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)  # cached on the strip
            strips.append(strip)
        x1, x2 = crop.column_span
        if (x1, x2) != (0, self.size.width):
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        top = max(0, len(self._lines) - height - self.back)
        index = top + y
        if index >= len(self._lines):
            return Strip.blank(width, self._style("base"))
        if y == 0 and self.back:
            text = f"↑ {top} earlier lines · {self.back} newer below (wheel down to follow)"
            return Strip([Segment(text, self._style("tail--more", partial=False))]).crop_extend(0, width, self._style("base"))
        key = (index + self._dropped, width)
        strip = self._cache.get(key)
        if strip is None:
            kind, text, first = self._lines[index]
            style = self._style(KIND_CLASS.get(kind, "tail--system"), partial=False)
            glyph = KIND_GLYPH.get(kind, " ") if first else " "
            segments = [Segment(f"{glyph} ", self._style("tail--gutter", partial=False) + Style(color=style.color)),
                        Segment(text, style)]
            strip = Strip(segments).crop_extend(0, width, self._style("base"))
            self._cache[key] = strip
        return strip
