"""Provides :class:`TranscriptDoc`: the layout of a long transcript as screen lines.

The review screen shows transcripts of up to a million events (a long runaway). Only the
lines on screen are rendered; this class answers "which event and which of its lines is at
row y" from prefix sums of event heights, and re-lays out only the event whose height
changed when one is folded or unfolded. Assistant text and errors start unfolded (wrapped
to the view's width); tool calls, tool results and the rest start folded to one line.

A short transcript is one :class:`~.data.EventIndex` read at once. A long one is *windowed*:
the seqs are cut into chunks of ``CHUNK`` events, each read from the store (its (trial_id,
seq) index) when it first comes into view, and at most ``MAX_CHUNKS`` are kept. Positions are
*slots*: chunk ``c`` owns slots ``c * CHUNK ...``, its entries first, then empty slots of
height 0 (a run of streamed assistant deltas is one entry, so a chunk has fewer entries than
events), so a position never moves when other chunks load. A chunk not read yet counts one
line per event. Runs of assistant deltas are not merged across a chunk's edge.
No Textual here, so the layout rules are tested on their own.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

from .data import OPEN_KINDS, EventIndex
from .format import event_summary
from .wrapping import wrap_text

MAX_WRAPPED = 4096  # events whose wrapped lines are cached; the rest are wrapped again when drawn
CHUNK = 4096  # events per window read from the store
MAX_CHUNKS = 24  # windows kept in memory (~100k events); the least recently drawn goes first


class _Chunk:
    __slots__ = ("heights", "index", "offsets", "used")

    def __init__(self, index: EventIndex):
        self.index = index
        self.heights: list[int] = []
        self.offsets: list[int] = [0]
        self.used = 0

    @property
    def height(self) -> int:
        return self.offsets[-1]


class _Column:
    """``doc.index.seqs[i]`` and friends over slots (None for a slot not read yet)."""

    def __init__(self, doc: TranscriptDoc, name: str):
        self.doc, self.name = doc, name

    def __len__(self) -> int:
        return len(self.doc)

    def __getitem__(self, i: int):
        found = self.doc._entry(i)
        return None if found is None else getattr(found[0].index, self.name)[found[1]]

    def __setitem__(self, i: int, value) -> None:
        found = self.doc._entry(i)
        if found is not None:
            getattr(found[0].index, self.name)[found[1]] = value

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return list(self) == other


class _Failures:
    """The slots of errors and failed tool results among the chunks read so far."""

    def __init__(self, doc: TranscriptDoc):
        self.doc = doc

    def __contains__(self, i: object) -> bool:
        found = self.doc._entry(i) if isinstance(i, int) else None
        return found is not None and found[1] in found[0].index.failures

    def __iter__(self):
        size = self.doc.size
        for c in sorted(self.doc.chunks):
            yield from sorted(c * size + local for local in self.doc.chunks[c].index.failures)

    def __len__(self) -> int:
        return sum(len(chunk.index.failures) for chunk in self.doc.chunks.values())

    def __eq__(self, other: object) -> bool:
        return set(self) == other


class _IndexView:
    def __init__(self, doc: TranscriptDoc):
        self.seqs, self.kinds = _Column(doc, "seqs"), _Column(doc, "kinds")
        self.texts, self.full = _Column(doc, "texts"), _Column(doc, "full")
        self.failures = _Failures(doc)


class _Heights:
    def __init__(self, doc: TranscriptDoc):
        self.doc = doc

    def __len__(self) -> int:
        return len(self.doc)

    def __getitem__(self, i: int) -> int:
        doc = self.doc
        c, local = doc._split(i)
        chunk = doc.chunks.get(c)
        if chunk is None:
            return 1
        return chunk.heights[local] if local < len(chunk.heights) else 0

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return list(self) == other


class _Offsets(_Heights):
    def __len__(self) -> int:
        return len(self.doc) + 1

    def __getitem__(self, i: int) -> int:
        doc = self.doc
        if i >= len(doc):
            return doc.height
        c, local = doc._split(i)
        chunk = doc.chunks.get(c)
        start = doc._chunk_offsets[c]
        if chunk is None:
            return start + local
        return start + chunk.offsets[min(local, len(chunk.heights))]


class TranscriptDoc:
    def __init__(self, index: EventIndex | None = None, width: int = 80, *, last_seq: int | None = None,
                 chunk: int = CHUNK):
        """The whole transcript (``index``), or a window over one of ``last_seq`` events
        (chunks come in through :meth:`add_chunk`)."""
        self.width = max(8, width)
        self.toggled: set[int] = set()  # slots whose fold state differs from the default
        self.folded_all = False
        self._wrapped: dict[int, list[str]] = {}
        self.chunks: dict[int, _Chunk] = {}
        self.pending: set[int] = set()  # chunks asked for and not in yet
        self._uses = 0
        if index is not None:
            self.windowed = False
            self.size = max(1, len(index.seqs))
            self.count, self._last_events = 1, len(index.seqs)
            self.chunks[0] = _Chunk(index)
        else:
            self.windowed = True
            self.size = chunk
            self.count = max(1, -(-(last_seq or 0) // chunk))
            self._last_events = (last_seq or 0) - (self.count - 1) * chunk
        self.index = _IndexView(self)
        self.heights = _Heights(self)
        self.offsets = _Offsets(self)
        self._chunk_offsets: list[int] = [0]
        self.layout(self.width)

    # -- slots and chunks ----------------------------------------------------------------------

    def _span(self, c: int) -> int:
        chunk = self.chunks.get(c)
        if c < self.count - 1:
            return self.size
        return len(chunk.heights) if chunk is not None else self._last_events

    def __len__(self) -> int:
        return (self.count - 1) * self.size + self._span(self.count - 1)

    def _split(self, i: int) -> tuple[int, int]:
        c = min(max(0, i) // self.size, self.count - 1)
        return c, i - c * self.size

    def _entry(self, i: int) -> tuple[_Chunk, int] | None:
        c, local = self._split(i)
        chunk = self.chunks.get(c)
        if chunk is None or not 0 <= local < len(chunk.heights):
            return None
        return chunk, local

    def loaded(self, i: int) -> bool:
        return self._split(i)[0] in self.chunks

    @property
    def complete(self) -> bool:
        """Every chunk is in memory (then failures and seqs can be looked up here)."""
        return len(self.chunks) == self.count

    def chunk_of(self, i: int) -> int:
        return self._split(i)[0]

    def chunk_of_seq(self, seq: int) -> int:
        return 0 if not self.windowed else min(max(0, seq - 1) // self.size, self.count - 1)

    def seq_range(self, c: int) -> tuple[int, int]:
        """(first, last) seq a chunk of a windowed transcript holds."""
        return c * self.size + 1, (c + 1) * self.size

    def seq_at(self, i: int) -> int:
        """The seq at slot ``i``; for a slot not read yet, the seq it will hold if seqs have no gaps."""
        found = self._entry(i)
        if found is not None:
            return found[0].index.seqs[found[1]]
        c, local = self._split(i)
        chunk = self.chunks.get(c)
        if chunk is not None:  # an empty slot after the chunk's entries
            return chunk.index.seqs[-1] if chunk.index.seqs else self.seq_range(c)[0]
        return c * self.size + local + 1

    def request(self, c: int) -> bool:
        """Mark chunk ``c`` as asked for; False if it is in or already on its way."""
        if c in self.chunks or c in self.pending:
            return False
        self.pending.add(c)
        return True

    def add_chunk(self, c: int, index: EventIndex) -> None:
        self.pending.discard(c)
        chunk = self.chunks[c] = _Chunk(index)
        self._lay_chunk(c, chunk)
        while len(self.chunks) > MAX_CHUNKS:
            oldest = min((k for k in self.chunks if k != c), key=lambda k: self.chunks[k].used)
            del self.chunks[oldest]
        self._reflow()

    def clamp(self, i: int) -> int:
        """The nearest entry at or before slot ``i`` (an empty slot has no event)."""
        i = max(0, min(len(self) - 1, i))
        c, local = self._split(i)
        chunk = self.chunks.get(c)
        if chunk is not None and local >= len(chunk.heights):
            if chunk.heights:
                return c * self.size + len(chunk.heights) - 1
            return self.clamp(c * self.size - 1) if c else 0
        return i

    def step(self, i: int, delta: int) -> int:
        """The slot ``delta`` entries from ``i``, skipping the empty slots at chunks' ends."""
        for _ in range(abs(delta)):
            j = i + (1 if delta > 0 else -1)
            if j < 0 or j >= len(self):
                break
            c, local = self._split(j)
            chunk = self.chunks.get(c)
            if chunk is not None and local >= len(chunk.heights):
                j = (c + 1) * self.size if delta > 0 else self.clamp(j)
                if j >= len(self):
                    break
            i = j
        return i

    @property
    def height(self) -> int:
        return self._chunk_offsets[-1]

    def is_open(self, i: int) -> bool:
        found = self._entry(i)
        if found is None:
            return False
        return (found[0].index.kinds[found[1]] in OPEN_KINDS and not self.folded_all) != (i in self.toggled)

    # -- layout --------------------------------------------------------------------------------

    def layout(self, width: int) -> None:
        """Lay every event in memory out for ``width`` columns of text (the view minus its gutter)."""
        self.width = max(8, width)
        self._wrapped.clear()
        for c, chunk in self.chunks.items():
            self._lay_chunk(c, chunk)
        self._reflow()

    def _lay_chunk(self, c: int, chunk: _Chunk) -> None:
        index, w, base = chunk.index, self.width, c * self.size
        open_kinds, toggled, folded_all = OPEN_KINDS, self.toggled, self.folded_all
        heights = []
        for n, kind in enumerate(index.kinds):
            if (kind in open_kinds and not folded_all) != (base + n in toggled):
                text = index.texts[n]
                heights.append(1 if len(text) <= w and "\n" not in text else len(wrap_text(text, w)))
            else:
                heights.append(1)
        chunk.heights = heights
        chunk.offsets = [0, *accumulate(heights)]

    def _reflow(self) -> None:
        heights = [self.chunks[c].height if c in self.chunks else self._span(c) for c in range(self.count)]
        self._chunk_offsets = [0, *accumulate(heights)]

    def _set_height(self, i: int) -> None:
        self._wrapped.pop(i, None)
        found = self._entry(i)
        if found is None:
            return
        chunk, local = found
        height = len(self.lines(i)) if self.is_open(i) else 1
        if height != chunk.heights[local]:
            chunk.heights[local] = height
            chunk.offsets[local + 1:] = accumulate(chunk.heights[local:], initial=chunk.offsets[local])
            del chunk.offsets[local]  # accumulate repeats the start value, already at offsets[local]
            self._reflow()

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
        self.folded_all = folded
        self.toggled = set()
        self.layout(self.width)

    # -- lookup ---------------------------------------------------------------------------------

    def locate(self, y: int) -> tuple[int, int] | None:
        """(slot, line within its event) at screen row ``y``, or None past the end. In a chunk not
        read yet every event counts one line (see :meth:`loaded`)."""
        if y < 0 or y >= self.height:
            return None
        c = bisect_right(self._chunk_offsets, y) - 1
        y -= self._chunk_offsets[c]
        chunk = self.chunks.get(c)
        if chunk is None:
            return c * self.size + y, 0
        self._uses += 1
        chunk.used = self._uses
        i = bisect_right(chunk.offsets, y) - 1
        return c * self.size + i, y - chunk.offsets[i]

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
        found = self._entry(i)
        if found is None:
            return "…"
        index, n = found[0].index, found[1]
        summary = event_summary(index.kinds[n], index.texts[n], limit=self.width + 40)
        return summary if index.full[n] else summary + " …"

    def next_failure(self, after: int, backwards: bool = False) -> int | None:
        """The next failure slot among the chunks in memory (the whole story only when ``complete``)."""
        candidates = [i for i in self.index.failures if (i < after if backwards else i > after)]
        if not candidates:
            return None
        return max(candidates) if backwards else min(candidates)

    def position_of_seq(self, seq: int) -> int | None:
        """The entry showing event ``seq``: its own, or the merged assistant text holding it
        (None while its chunk is not in memory)."""
        c = self.chunk_of_seq(seq)
        chunk = self.chunks.get(c)
        if chunk is None:
            return None
        seqs = chunk.index.seqs
        i = bisect_right(seqs, seq) - 1
        if 0 <= i < len(seqs):
            return c * self.size + i
        return c * self.size if self.windowed and seqs else None
