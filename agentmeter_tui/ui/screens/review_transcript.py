"""Provides :class:`ReviewTranscript`: reading the review screen's transcript from the store,
a window at a time, and the jumps (next error, search) over it.

A transcript of up to ``WHOLE`` events is read in one pass, as before. A longer one (a
runaway of a million events) opens on its first window only (``transcript_doc.CHUNK`` events,
one walk of the store's (trial_id, seq) index), so the first frame does not wait for the
rest; the view asks for further windows as they come into view (``ChunkNeeded``). Search and
the jump to the next error are store queries that return a seq (search through the store's
trigram index, which the screen completes in the background when it lags); the screen reads
that seq's window if needed and lands on it. Folding, search and the jumps mean the same as on a short
transcript; only the order of reading differs.
"""

from __future__ import annotations

from typing import Any

from ..data import event_index, index_events, last_seq, next_failure_seq, search_events
from ..review_data import masked_event_index
from ..transcript_doc import CHUNK, TranscriptDoc
from ..widgets.transcript_view import GUTTER, TranscriptView

WINDOW = CHUNK  # events per window of a long transcript
WHOLE = CHUNK  # transcripts up to this many events are read in one pass
INDEX_CHUNK = 2048  # events indexed per store call while the screen is open (~10 ms)


class ReviewTranscript:
    session: Any
    trial_id: int | None
    masker: Any
    query_one: Any
    run_worker: Any
    notify: Any

    async def _read_transcript(self, trial_id: int) -> TranscriptDoc:
        """The document for ``trial_id``: whole, or its first window of a long transcript."""
        store, view = self.session.store, self.query_one(TranscriptView)
        width = max(8, view.size.width - GUTTER - 1)
        last = await store.call(last_seq, trial_id)
        if last <= WHOLE:
            return TranscriptDoc(await self._read_window(trial_id, 0, None), width)
        doc = TranscriptDoc(None, width, last_seq=last, chunk=WINDOW)
        doc.request(0)
        first, end = doc.seq_range(0)
        doc.add_chunk(0, await self._read_window(trial_id, first, end))
        # Search on a long transcript asks the store's index; finish it if the runner has not
        # (after the first window: the store thread takes one call at a time, so the first
        # window's read would otherwise wait behind an index chunk).
        self.run_worker(self._index_for_search(), group="search-index", exclusive=True, exit_on_error=False)
        return doc

    async def _index_for_search(self) -> None:
        """Index the store's events not indexed yet, a small chunk per store call, so the
        screen's own reads wait at most one chunk; search scans until it is done."""
        store = self.session.store
        while await store.call(index_events, INDEX_CHUNK):
            pass

    async def _read_window(self, trial_id: int, first: int, last: int | None):
        store = self.session.store
        if self.session.blind:
            return await store.call(masked_event_index, trial_id, self.masker, first, last)
        return await store.call(event_index, trial_id, first, last)

    def on_transcript_view_chunk_needed(self, message: TranscriptView.ChunkNeeded) -> None:
        self.run_worker(self._load_chunk(message.view.doc, message.chunk), group="review-chunks",
                        exit_on_error=False)

    async def _load_chunk(self, doc: TranscriptDoc | None, c: int) -> None:  # None: the view was cleared
        trial_id = self.trial_id
        if trial_id is None or doc is None:
            return
        first, last = doc.seq_range(c)
        index = await self._read_window(trial_id, first, last)
        view = self.query_one(TranscriptView)
        if view.doc is doc:  # still the same transcript
            doc.add_chunk(c, index)
            view.chunk_loaded()

    async def _goto_seq(self, seq: int) -> None:
        """Unfold and show the entry holding event ``seq``, reading its window first if needed."""
        view = self.query_one(TranscriptView)
        doc = view.doc
        if doc is None:
            return
        index = doc.position_of_seq(seq)
        if index is None and doc.windowed and self.trial_id is not None:
            c = doc.chunk_of_seq(seq)
            first, last = doc.seq_range(c)
            window = await self._read_window(self.trial_id, first, last)
            if view.doc is not doc:
                return
            doc.add_chunk(c, window)
            view.chunk_loaded()
            index = doc.position_of_seq(seq)
        if index is not None:
            view.unfold(index)
            view.show_event(index)

    # -- jumps -------------------------------------------------------------------------------------

    def action_next_failure(self, direction: int) -> None:
        view = self.query_one(TranscriptView)
        doc = view.doc
        if doc is None:
            return
        if not doc.complete:
            # Not all of it is in memory: the store knows where the next failure is.
            self.run_worker(self._next_failure(direction), group="search", exclusive=True, exit_on_error=False)
            return
        target = doc.next_failure(view.cursor, backwards=direction < 0)
        if target is None:
            self.notify("No more errors or failed tool calls that way.")
            return
        view.unfold(target)
        view.show_event(target)

    async def _next_failure(self, direction: int) -> None:
        view = self.query_one(TranscriptView)
        doc, trial_id = view.doc, self.trial_id
        if doc is None or trial_id is None:
            return
        after = doc.seq_at(view.cursor)
        seq = await self.session.store.call(next_failure_seq, trial_id, after, direction < 0)
        if seq is None:
            self.notify("No more errors or failed tool calls that way.")
            return
        await self._goto_seq(seq)

    async def _search(self, needle: str, direction: int) -> None:
        view = self.query_one(TranscriptView)
        doc = view.doc
        after = doc.seq_at(view.cursor) if len(doc) else 0
        seq = await self.session.store.call(search_events, self.trial_id, needle, after, direction < 0)
        if seq is None:
            anywhere = await self.session.store.call(search_events, self.trial_id, needle, 0, False)
            self.notify(f"No more matches for '{needle}' that way." if anywhere is not None
                        else f"No match for '{needle}' in this transcript.")
            return
        await self._goto_seq(seq)
