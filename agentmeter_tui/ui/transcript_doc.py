"""Provides :class:`TranscriptDoc`: the layout of a long transcript as screen lines.

The review screen shows transcripts of tens of thousands of events. Only the lines on
screen are rendered; this class answers "which event and which of its lines is at row y"
from a prefix sum of event heights, and re-lays out only from the event whose height
changed when one is folded or unfolded. Assistant text and errors start unfolded (wrapped
to the view's width); tool calls, tool results and the rest start folded to one line.
No Textual here, so the layout rules are tested on their own.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

from .data import OPEN_KINDS, EventIndex
from .format import event_summary

MAX_WRAPPED = 4096  # events whose wrapped lines are cached; the rest are wrapped again when drawn


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


class TranscriptDoc:
    def __init__(self, index: EventIndex, width: int = 80):
        self.index = index
        self.width = max(8, width)
        self.toggled: set[int] = set()  # events whose fold state differs from their kind's default
        self._wrapped: dict[int, list[str]] = {}
        self.heights: list[int] = []
        self.offsets: list[int] = [0]
        self.layout(self.width)

    def __len__(self) -> int:
        return len(self.index.seqs)

    @property
    def height(self) -> int:
        return self.offsets[-1]

    def is_open(self, i: int) -> bool:
        return (self.index.kinds[i] in OPEN_KINDS) != (i in self.toggled)

    # -- layout --------------------------------------------------------------------------------

    def layout(self, width: int) -> None:
        """Lay every event out for ``width`` columns of text (the view minus its gutter)."""
        self.width = max(8, width)
        self._wrapped.clear()
        kinds, texts, open_kinds, toggled = self.index.kinds, self.index.texts, OPEN_KINDS, self.toggled
        heights = []
        w = self.width
        for i, kind in enumerate(kinds):
            if (kind in open_kinds) != (i in toggled):
                text = texts[i]
                heights.append(1 if len(text) <= w and "\n" not in text else len(wrap_text(text, w)))
            else:
                heights.append(1)
        self.heights = heights
        self.offsets = [0, *accumulate(heights)]

    def _relayout_from(self, i: int) -> None:
        self.offsets[i + 1:] = accumulate(self.heights[i:], initial=self.offsets[i])
        del self.offsets[i]  # accumulate repeats the start value, already at offsets[i]

    def _set_height(self, i: int) -> None:
        self._wrapped.pop(i, None)
        height = len(self.lines(i)) if self.is_open(i) else 1
        if height != self.heights[i]:
            self.heights[i] = height
            self._relayout_from(i)

    def toggle(self, i: int) -> None:
        self.toggled ^= {i}
        self._set_height(i)

    def set_text(self, i: int, text: str) -> None:
        """The whole text of an event whose kept text was cut (read again when unfolded)."""
        self.index.texts[i] = text
        self.index.full[i] = True
        self._set_height(i)

    def fold_all(self, folded: bool) -> None:
        """Fold every event (``True``) or go back to the defaults (``False``)."""
        if folded:
            self.toggled = {i for i, k in enumerate(self.index.kinds) if k in OPEN_KINDS}
        else:
            self.toggled = set()
        self.layout(self.width)

    # -- lookup ---------------------------------------------------------------------------------

    def locate(self, y: int) -> tuple[int, int] | None:
        """(event index, line within the event) at screen row ``y``, or None past the end."""
        if y < 0 or y >= self.height:
            return None
        i = bisect_right(self.offsets, y) - 1
        return i, y - self.offsets[i]

    def lines(self, i: int) -> list[str]:
        """The display lines of event ``i`` in its current fold state."""
        if not self.is_open(i):
            return [self.folded(i)]
        cached = self._wrapped.get(i)
        if cached is None:
            if len(self._wrapped) >= MAX_WRAPPED:
                self._wrapped.clear()
            cached = self._wrapped[i] = wrap_text(self.index.texts[i], self.width) or [""]
        return cached

    def folded(self, i: int) -> str:
        summary = event_summary(self.index.kinds[i], self.index.texts[i], limit=self.width + 40)
        return summary if self.index.full[i] else summary + " …"

    def next_failure(self, after: int, backwards: bool = False) -> int | None:
        failures = self.index.failures
        if not failures:
            return None
        candidates = [i for i in failures if (i < after if backwards else i > after)]
        if not candidates:
            return None
        return max(candidates) if backwards else min(candidates)

    def position_of_seq(self, seq: int) -> int | None:
        """The entry showing event ``seq``: its own, or the merged assistant text holding it."""
        seqs = self.index.seqs
        i = bisect_right(seqs, seq) - 1
        return i if 0 <= i < len(seqs) else None
