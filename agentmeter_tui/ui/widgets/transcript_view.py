"""Provides :class:`TranscriptView`: a virtual list over a whole transcript, for review.

Only the rows on screen are rendered: :class:`~..transcript_doc.TranscriptDoc` maps a row to
(event, line) by bisection, so a million-event transcript scrolls as fast as a short one. A
cursor selects an event; space or enter folds and unfolds it. Unfolding an event whose text
was cut when the index was read asks the screen for the whole text (``TextNeeded``); a row
of a window of a long transcript not read yet shows a placeholder and asks the screen to
read that window (``ChunkNeeded``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..format import KIND_GLYPH
from ..transcript_doc import TranscriptDoc

GUTTER = 9  # "  12345 › " : sequence number, kind glyph
KIND_CLASS = {
    "assistant": "tv--assistant", "reasoning": "tv--reasoning", "tool_call": "tv--tool", "tool_result": "tv--result",
    "error": "tv--error", "usage": "tv--usage", "system": "tv--system", "status": "tv--status", "raw": "tv--system",
}


class TranscriptView(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False, id="tv-up"),
        Binding("down", "cursor(1)", "Down", show=False, id="tv-down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="tv-page-up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="tv-page-down"),
        Binding("home", "edge(0)", "First event", show=False, id="tv-home"),
        Binding("end", "edge(1)", "Last event", show=False, id="tv-end"),
        Binding("space,enter", "toggle_fold", "Fold/unfold", id="fold", tooltip="Fold or unfold the event at the cursor"),
        Binding("z", "fold_all", "Fold all", id="fold-all", tooltip="Fold every event, or back to the defaults"),
    ]
    COMPONENT_CLASSES = {"tv--gutter", "tv--cursor", "tv--match", "tv--failure", "tv--fold", *KIND_CLASS.values()}

    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    @dataclass
    class TextNeeded(Message):
        view: TranscriptView
        index: int

    @dataclass
    class ChunkNeeded(Message):
        view: TranscriptView
        chunk: int

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.doc: TranscriptDoc | None = None
        self.needle: str | None = None
        self._needle_re: re.Pattern | None = None
        self._all_folded = False
        self._pending_show: tuple[int, bool] | None = None  # a show_event waiting for its chunk
        self.numbered = True  # event numbers in the gutter (off in blind review)

    # -- content --------------------------------------------------------------------------------

    def load(self, doc: TranscriptDoc) -> None:
        self.doc = doc
        self.refresh()  # ``numbered`` may have changed with the doc
        self._all_folded = False
        self._pending_show = None
        width = self.size.width - GUTTER - 1
        if width > 8 and width != doc.width:
            doc.layout(width)
        self._sync_size()
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.cursor = 0

    def _sync_size(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, self.doc.height if self.doc else 0)
        self.refresh()

    def on_resize(self) -> None:
        if self.doc is None:
            return
        width = self.size.width - GUTTER - 1
        if width > 8 and width != self.doc.width:
            self.doc.layout(width)
            self._sync_size()
            self.show_event(self.cursor)

    def set_text(self, index: int, text: str) -> None:
        if self.doc is not None:
            self.doc.set_text(index, text)
            self._sync_size()

    def chunk_loaded(self) -> None:
        """A window came in from the store: heights may have changed, a waiting jump can land."""
        if self.doc is None:
            return
        self._sync_size()
        pending, self._pending_show = self._pending_show, None
        if pending is not None:
            self.show_event(*pending[:1], top=pending[1])
        else:
            self.cursor = self.doc.clamp(self.cursor)

    def _need(self, index: int) -> None:
        if self.doc is not None and self.doc.request(self.doc.chunk_of(index)):
            self.post_message(self.ChunkNeeded(self, self.doc.chunk_of(index)))

    def set_needle(self, needle: str | None) -> None:
        self.needle = needle or None
        self._needle_re = re.compile(re.escape(needle), re.IGNORECASE) if needle else None
        self.refresh()

    # -- cursor and folding --------------------------------------------------------------------

    def watch_cursor(self, cursor: int) -> None:
        self.refresh()

    def show_event(self, index: int, *, top: bool = False) -> None:
        """Move the cursor to event ``index`` and scroll it into view."""
        if self.doc is None or not len(self.doc):
            return
        index = self.doc.clamp(index)
        self.cursor = index
        if not self.doc.loaded(index):
            self._pending_show = (index, top)  # scrolls there now, and again once the window is in
            self._need(index)
        start, height = self.doc.offsets[index], self.doc.heights[index]
        if top:
            self.scroll_to(y=start, animate=False, immediate=True)
        else:
            self.scroll_to_region(Region(0, start, 1, min(height, max(1, self.size.height))), animate=False,
                                  immediate=True, force=True)

    def unfold(self, index: int) -> None:
        if self.doc is not None and not self.doc.is_open(index):
            self._toggle(index)

    def _toggle(self, index: int) -> None:
        doc = self.doc
        if doc is None:
            return
        opening = not doc.is_open(index)
        doc.toggle(index)
        if opening and not doc.index.full[index]:
            self.post_message(self.TextNeeded(self, index))
        self._sync_size()

    def action_cursor(self, step: int) -> None:
        if self.doc is not None:
            self.show_event(self.doc.step(self.cursor, step))

    def action_page(self, direction: int) -> None:
        """Move the cursor a screenful of lines, scrolling with it."""
        doc = self.doc
        if doc is None or not len(doc):
            return
        page = max(1, self.size.height - 1)
        target = max(0, min(doc.height - 1, doc.offsets[self.cursor] + direction * page))
        located = doc.locate(target)
        if located is not None:
            self.scroll_to(y=self.scroll_offset.y + direction * page, animate=False, immediate=True)
            self.show_event(located[0])

    def action_edge(self, end: int) -> None:
        if self.doc is not None:
            self.show_event(len(self.doc) - 1 if end else 0)

    def action_toggle_fold(self) -> None:
        self._toggle(self.cursor)
        self.show_event(self.cursor)

    def action_fold_all(self) -> None:
        if self.doc is None:
            return
        self._all_folded = not self._all_folded
        self.doc.fold_all(self._all_folded)
        self._sync_size()
        self.show_event(self.cursor, top=True)  # positions are slots: the cursor's event keeps its own

    def on_click(self, event) -> None:
        if self.doc is None:
            return
        located = self.doc.locate(int(self.scroll_offset.y) + event.y)
        if located is not None:
            self.cursor = located[0]

    # -- rendering ---------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        doc = self.doc
        located = doc.locate(int(self.scroll_offset.y) + y) if doc is not None else None
        if doc is None or located is None:
            return Strip.blank(width, self.rich_style)
        index, line = located
        if not doc.loaded(index):
            self._need(index)
            return Strip([Segment(f"{self._number(doc.seq_at(index))} ⋯ reading…",
                                  self.get_component_rich_style("tv--gutter"))]
                         ).crop_extend(0, width, self.rich_style)
        kind = doc.index.kinds[index]
        failed = index in doc.index.failures
        style = self.get_component_rich_style("tv--failure" if failed and kind == "tool_result" else
                                              KIND_CLASS.get(kind, "tv--system"))
        gutter = self.get_component_rich_style("tv--gutter")
        if index == self.cursor:
            cursor = self.get_component_rich_style("tv--cursor")
            style, gutter = style + Style(bgcolor=cursor.bgcolor), gutter + cursor
        if line == 0:
            fold = "▸" if not doc.is_open(index) and kind != "assistant" else KIND_GLYPH.get(kind, " ")
            head = f"{self._number(doc.index.seqs[index])} {fold} "
        else:
            head = " " * (GUTTER - 2) + "│ "
        segments = [Segment(head, gutter + Style(color=style.color) if line == 0 else gutter)]
        segments.extend(self._highlight(doc.lines(index)[line], style))
        return Strip(segments).crop_extend(0, width, style if index == self.cursor else self.rich_style)

    def _number(self, seq: int) -> str:
        """The gutter's event number (blank when ``numbered`` is off: blind review)."""
        return f"{seq:>7}" if self.numbered else " " * 7

    def _highlight(self, text: str, style: Style) -> list[Segment]:
        if self._needle_re is None or not text:
            return [Segment(text, style)]
        match_style = style + self.get_component_rich_style("tv--match")
        segments, last = [], 0
        for match in self._needle_re.finditer(text):
            if match.start() > last:
                segments.append(Segment(text[last:match.start()], style))
            segments.append(Segment(match.group(), match_style))
            last = match.end()
        segments.append(Segment(text[last:], style))
        return segments
