"""Provides :class:`ReviewScreen`: read a finished trial's transcript and score it 0-3.

The transcript is a virtual list over one indexed read of the trial's events, so a
50,000-event trial opens in a fraction of a second; search and the jump to the next error
or failed tool call run as store queries or over the index. Beside it: the score (shown as
saved only once ``Store.add_score`` has committed), usage and cost, the verifier's verdict,
and the cell's other trials with its median. ``]`` goes to the next unscored trial.
"""

from __future__ import annotations

import statistics
from functools import partial

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.markup import escape
from textual.widgets import DataTable, Input, Static

from .. import format as fmt
from ..data import TrialDetail, event_index, event_text, review_queue, search_events, trial_detail
from ..transcript_doc import TranscriptDoc
from ..widgets.footer import KeysFooter
from ..widgets.review_panels import ReviewPanel, score_markup, usage_markup, verdict_renderable
from ..widgets.transcript_view import GUTTER, TranscriptView
from ..widgets.trial_table import TrialTable
from .base import SessionScreen
from .dialogs import NoteDialog


class ReviewScreen(SessionScreen):
    REFRESH_SECONDS = 2.0
    BINDINGS = [
        *(Binding(str(n), f"score({n})", f"Score {n}", id=f"score-{n}", show=n == 0,
                  tooltip=f"Score {n}") for n in range(4)),
        Binding("n", "note", "Note", id="note", tooltip="Add a note to this trial"),
        Binding("right_square_bracket", "next_unscored", "Next unscored", id="next-unscored"),
        Binding("left_square_bracket", "previous", "Previous", id="previous", tooltip="The previous trial"),
        Binding("slash", "search", "Search", id="search", tooltip="Search the transcript (enter: next match)"),
        Binding("f3", "search_next(1)", "Next match", id="search-next", show=False),
        Binding("shift+f3", "search_next(-1)", "Previous match", id="search-previous", show=False),
        Binding("e", "next_failure(1)", "Next error", id="next-failure",
                tooltip="Jump to the next error or failed tool call"),
        Binding("E", "next_failure(-1)", "Previous error", id="previous-failure", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="review-screen")
        self.trial_id: int | None = None
        self.detail: TrialDetail | None = None
        self.queue: list[tuple[int, bool]] = []
        self.saving: int | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="review-title", classes="screen-title")
        with Horizontal(id="review-body"):
            yield TranscriptView(id="transcript")
            with VerticalScroll(id="review-side"):
                yield ReviewPanel("Score", id="score-panel", classes="panel")
                yield ReviewPanel("Usage and cost", id="usage-panel", classes="panel")
                yield Static("", id="cell-title", classes="section-title")
                yield TrialTable(columns=("id", "trial", "status", "tokens", "usd", "score"), widths={"status": 12},
                                 id="siblings")
                yield ReviewPanel("Verifier", id="verdict-panel", classes="panel")
        yield Input(placeholder="search the transcript · enter: next match · esc: close", id="search")
        yield KeysFooter()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#search", Input).display = False
        self.query_one(TranscriptView).focus()

    # -- loading -----------------------------------------------------------------------------------

    def open(self, trial_id: int | None) -> None:
        """Show ``trial_id`` (None: the first unscored trial, else the last one)."""
        self.run_worker(partial(self._open, trial_id), group="review-load", exclusive=True, exit_on_error=False)

    async def _open(self, trial_id: int | None) -> None:
        store = self.session.store
        self.queue = await store.call(review_queue, self.session.suite_id)
        if trial_id is None:
            unscored = [i for i, scored in self.queue if not scored]
            trial_id = unscored[0] if unscored else (self.queue[-1][0] if self.queue else None)
        if trial_id is None:
            self.query_one("#review-title", Static).update("Nothing to review yet: no trial has finished.")
            return
        detail = await store.call(trial_detail, trial_id)
        if detail is None:
            self.notify(f"No trial {trial_id} in this store.", severity="error")
            return
        index = await store.call(event_index, trial_id)
        view = self.query_one(TranscriptView)
        doc = TranscriptDoc(index, max(8, view.size.width - GUTTER - 1))
        self.trial_id, self.detail, self.saving = trial_id, detail, None
        view.load(doc)
        self._show_detail()

    def on_screen_resume(self) -> None:
        if self.trial_id is None:
            self.open(None)

    def flush(self) -> None:
        """Keep the title's progress current while others score or the runner finishes trials."""
        if self.detail is not None:
            self._show_title()

    def _show_title(self) -> None:
        detail = self.detail
        scored = sum(1 for _, s in self.queue if s)
        position = next((n for n, (i, _) in enumerate(self.queue, 1) if i == self.trial_id), None)
        self.query_one("#review-title", Static).update(
            f"[b]Review[/] {escape(fmt.trial_title(detail.row))} [$text-muted]│[/] "
            f"{position or '?'} of {len(self.queue)} finished · {scored} scored [$text-muted]│ reviewer[/] "
            f"{escape(self.session.reviewer)}")

    def _show_detail(self) -> None:
        detail = self.detail
        if detail is None:
            return
        self._show_title()
        self.query_one("#score-panel", Static).update(score_markup(detail, self.saving))
        self.query_one("#usage-panel", Static).update(usage_markup(detail))
        self.query_one("#verdict-panel", Static).update(verdict_renderable(detail))
        scores = [s["score"] for s in detail.siblings if s["score"] is not None]
        median = f"median {statistics.median(scores):g} of {len(scores)} scored" if scores else "no scores yet"
        self.query_one("#cell-title", Static).update(
            f"Cell [b]{escape(detail.row['task_id'])}[/] · {escape(detail.row['model'])} × "
            f"{escape(detail.row['cli'])} · {median}")
        rows = [{**s, "trial": s["trial_index"]} for s in detail.siblings]
        table = self.query_one("#siblings", TrialTable)
        table.sync(rows)

    def on_transcript_view_text_needed(self, message: TranscriptView.TextNeeded) -> None:
        self.run_worker(self._load_text(message.index), exit_on_error=False)

    async def _load_text(self, index: int) -> None:
        view = self.query_one(TranscriptView)
        if view.doc is None or self.trial_id is None:
            return
        text = await self.session.store.call(event_text, self.trial_id, view.doc.index.seqs[index])
        view.set_text(index, text)

    @on(DataTable.RowSelected, "#siblings")
    def _open_sibling(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.open(int(event.row_key.value))

    # -- scoring -------------------------------------------------------------------------------------

    def action_score(self, score: int) -> None:
        if self.detail is None or self.saving is not None:
            return
        self.saving = score
        self.query_one("#score-panel", Static).update(score_markup(self.detail, score))
        self.run_worker(self._save_score(self.detail.row["id"], score), group="score", exit_on_error=False)

    async def _save_score(self, trial_id: int, score: int) -> None:
        store, reviewer = self.session.store, self.session.reviewer
        try:
            # add_score commits before it returns: only then does the panel say "saved".
            await store.call(lambda s: s.add_score(trial_id, score, reviewer))
            detail = await store.call(trial_detail, trial_id)
        except Exception as exc:
            self.saving = None
            self.notify(f"Score not saved: {exc}", severity="error")
            self._show_detail()
            return
        self.saving = None
        self.session.scores[trial_id] = score
        self.queue = [(i, scored or i == trial_id) for i, scored in self.queue]
        if self.trial_id == trial_id:
            self.detail = detail
            self._show_detail()

    def action_note(self) -> None:
        if self.detail is None:
            return
        trial_id = self.detail.row["id"]

        def saved(text: str | None) -> None:
            if text:
                self.run_worker(self._save_note(trial_id, text), exit_on_error=False)

        self.app.push_screen(NoteDialog(f"Note on trial #{trial_id}"), saved)

    async def _save_note(self, trial_id: int, text: str) -> None:
        store = self.session.store
        await store.call(lambda s: s.add_note(trial_id, text, self.session.reviewer))
        if self.trial_id == trial_id:
            self.detail = await store.call(trial_detail, trial_id)
            self._show_detail()
        self.notify("Note saved.")

    def action_next_unscored(self) -> None:
        ids = [i for i, _ in self.queue]
        start = ids.index(self.trial_id) + 1 if self.trial_id in ids else 0
        for trial_id, scored in self.queue[start:] + self.queue[:start]:
            if not scored and trial_id != self.trial_id:
                self.open(trial_id)
                return
        self.notify("Every finished trial has a score.")

    def action_previous(self) -> None:
        ids = [i for i, _ in self.queue]
        if self.trial_id in ids and ids.index(self.trial_id) > 0:
            self.open(ids[ids.index(self.trial_id) - 1])

    # -- navigation --------------------------------------------------------------------------------

    def action_next_failure(self, direction: int) -> None:
        view = self.query_one(TranscriptView)
        if view.doc is None:
            return
        target = view.doc.next_failure(view.cursor, backwards=direction < 0)
        if target is None:
            self.notify("No more errors or failed tool calls that way.")
            return
        view.unfold(target)
        view.show_event(target)

    def action_search(self) -> None:
        search = self.query_one("#search", Input)
        search.display = True
        search.focus()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self.query_one(TranscriptView).set_needle(event.value)
        self.action_search_next(1)

    def on_key(self, event) -> None:
        search = self.query_one("#search", Input)
        if event.key == "escape" and search.has_focus:
            search.display = False
            self.query_one(TranscriptView).focus()
            event.stop()

    def action_search_next(self, direction: int) -> None:
        view = self.query_one(TranscriptView)
        if view.doc is None or not view.needle or self.trial_id is None:
            return
        self.run_worker(partial(self._search, view.needle, direction), group="search", exclusive=True, exit_on_error=False)

    async def _search(self, needle: str, direction: int) -> None:
        view = self.query_one(TranscriptView)
        doc = view.doc
        after = doc.index.seqs[view.cursor] if len(doc) else 0
        seq = await self.session.store.call(search_events, self.trial_id, needle, after, direction < 0)
        if seq is None:
            self.notify(f"No more matches for '{needle}'.")
            return
        index = doc.position_of_seq(seq)
        if index is not None:
            view.unfold(index)
            view.show_event(index)
