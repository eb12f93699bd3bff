"""Provides :class:`ReviewScreen`: read a finished trial's transcript and score it 0-3.

The transcript is a virtual list over one indexed read of the trial's events, so a
50,000-event trial opens in a fraction of a second; search and the jump to the next error
or failed tool call run as store queries or over the index. Beside it: the score (shown as
saved only once ``store.reviews.add_score`` has committed), usage and cost, the verifier's verdict,
and the cell's other trials with its median. ``]`` goes to the next unscored trial.

Two modes change what the screen shows. Blind (``b``, ``agentmeter review --blind``): no model,
CLI, tokens, cost, flags or grid position, their names masked in the transcript, and only the
trials this reviewer has not scored, in a seeded shuffled order; leaving it asks first and is
recorded in the store. Adjudication (``a``): the trials whose reviewers disagree, with every
reviewer's score and note beside the transcript; a score given here is the trial's final one.
``c`` opens two trials of the task side by side.
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
from ..data import (
    TrialDetail,
    event_text,
    latest_scores,
    trial_detail,
)
from ...core.review.reviewing import empty_queue_reason
from ..review_data import (
    blind_detail,
    masked_event_text,
    reviewer_scores,
    suite_masker,
)
from ..widgets.footer import KeysFooter
from ..widgets.money import HoldBanner
from ..widgets.review_panels import (
    ReviewPanel,
    reviews_markup,
    score_markup,
    usage_markup,
    verdict_renderable,
)
from ..widgets.transcript_view import TranscriptView
from ..widgets.trial_table import TrialTable
from .base import SessionScreen
from .dialogs import NoteDialog
from .money import MoneyKeys
from .review_modes import ReviewModes
from .review_transcript import ReviewTranscript


class ReviewScreen(ReviewTranscript, ReviewModes, MoneyKeys, SessionScreen):
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
        Binding("b", "blind", "Blind", id="blind",
                tooltip="Blind review: hide model, CLI, tokens, cost; unblinding asks and is recorded"),
        Binding("a", "adjudicate", "Adjudicate", id="adjudicate",
                tooltip="Trials whose reviewers disagree: your score becomes the final one"),
        Binding("c", "compare", "Compare", id="compare", tooltip="This trial beside another of the same task"),
        Binding("R", "rerun_trial", "Rerun trial", id="review-rerun-trial", show=False,
                tooltip="Append a new attempt of this trial (asks; nothing is overwritten)"),
    ]

    def __init__(self) -> None:
        super().__init__(id="review-screen")
        self.trial_id: int | None = None
        self.detail: TrialDetail | None = None
        self.queue: list[tuple[int, bool]] = []
        self.saving: int | None = None
        self.adjudicating = False
        self.threshold = 2
        self.masker = None  # blind mode: masks identities in every text shown

    def compose(self) -> ComposeResult:
        yield Static("", id="review-title", classes="screen-title")
        yield HoldBanner()
        with Horizontal(id="review-body"):
            yield TranscriptView(id="transcript")
            with VerticalScroll(id="review-side"):
                yield ReviewPanel("Score", id="score-panel", classes="panel")
                yield ReviewPanel("Reviews", id="reviews-panel", classes="panel")
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
        store, blind = self.session.store, self.session.blind
        if blind and self.masker is None:
            self.masker = await store.call(suite_masker, self.session.suite_id)
        self.queue = await self._load_queue()
        ids = [i for i, _ in self.queue]
        if (blind or self.adjudicating) and trial_id is not None and trial_id not in ids:
            trial_id = None  # blind and adjudication show only their own queue
        if trial_id is None:
            unscored = [i for i, scored in self.queue if not scored]
            trial_id = unscored[0] if unscored else (self.queue[-1][0] if self.queue else None)
        if trial_id is None:
            self.trial_id, self.detail = None, None
            self.query_one(TranscriptView).display = not (blind or self.adjudicating)
            why = await store.call(empty_queue_reason, self.session.suite_id, self.session.reviewer,
                                   self.adjudicating)
            self.query_one("#review-title", Static).update(
                f"[b]Adjudication[/]: nothing to settle: {escape(why)}. a: back to review" if self.adjudicating else
                f"[b]Blind review[/]: nothing left for {escape(self.session.reviewer)} to score: {escape(why)}. "
                "b: unblind" if blind else f"Nothing to review yet: {escape(why)}.")
            for panel in ("#score-panel", "#reviews-panel", "#usage-panel", "#verdict-panel"):
                self.query_one(panel).display = False
            self.query_one("#siblings").display = self.query_one("#cell-title").display = False
            return
        self.query_one(TranscriptView).display = True
        detail = await store.call(trial_detail, trial_id)
        if detail is None:
            self.notify(f"No trial {trial_id} in this store.", severity="error")
            return
        if blind:
            detail = blind_detail(detail, self.masker)
        doc = await self._read_transcript(trial_id)
        view = self.query_one(TranscriptView)
        self.trial_id, self.detail, self.saving = trial_id, detail, None
        # Blind, the hidden usage lines and notes would show as gaps in the event numbers.
        view.numbered = not blind
        view.load(doc)
        self._show_detail()

    def on_screen_resume(self) -> None:
        if self.trial_id is None:
            self.open(None)

    def flush(self) -> None:
        """Keep the title's progress current while others score or the runner finishes trials."""
        if self.detail is not None:
            self._show_title(self.detail)

    def _show_title(self, detail: TrialDetail) -> None:
        scored = sum(1 for _, s in self.queue if s)
        position = next((n for n, (i, _) in enumerate(self.queue, 1) if i == self.trial_id), None)
        reviewer = f"[$text-muted]│ reviewer[/] {escape(self.session.reviewer)}"
        if self.session.blind:
            # No id, model, CLI or trial index: only the task and this reviewer's progress.
            self.query_one("#review-title", Static).update(
                f"[b $warning]Blind review[/] task [b]{escape(detail.row['task_id'])}[/] [$text-muted]│[/] "
                f"{position or '?'} of {len(self.queue)} · {scored} scored by you "
                + ("[$text-muted]│[/] [b]adjudicating[/] " if self.adjudicating else "") + reviewer)
            return
        if self.adjudicating:
            self.query_one("#review-title", Static).update(
                f"[b $warning]Adjudicate[/] {escape(fmt.trial_title(detail.row))} [$text-muted]│[/] "
                f"{position or '?'} of {len(self.queue)} apart by ≥ {self.threshold} {reviewer}")
            return
        self.query_one("#review-title", Static).update(
            f"[b]Review[/] {escape(fmt.trial_title(detail.row))} [$text-muted]│[/] "
            f"#{position or '?'} of {len(self.queue)} in the queue · {scored} scored [$text-muted]│ reviewer[/] "
            f"{escape(self.session.reviewer)}")

    def _show_detail(self) -> None:
        detail = self.detail
        if detail is None:
            return
        self._show_title(detail)
        blind = self.session.blind
        for panel in ("#score-panel", "#verdict-panel"):
            self.query_one(panel).display = True
        self.query_one("#reviews-panel").display = self.adjudicating
        for widget in ("#usage-panel", "#cell-title", "#siblings"):
            self.query_one(widget).display = not blind
        self.query_one("#score-panel", Static).update(score_markup(
            self._own(detail), self.saving,
            unscored="no final score yet · 0 1 2 3 sets it" if self.adjudicating else "not scored yet · press 0 1 2 3"))
        self.query_one("#verdict-panel", Static).update(verdict_renderable(detail))
        if self.adjudicating:
            self.query_one("#reviews-panel", Static).update(reviews_markup(reviewer_scores(detail.scores),
                                                                           detail.notes, self._mask))
        if blind:
            return
        self.query_one("#usage-panel", Static).update(usage_markup(detail))
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
        seq = view.doc.index.seqs[index]
        if self.session.blind:
            text = await self.session.store.call(masked_event_text, self.trial_id, seq, self.masker)
        else:
            text = await self.session.store.call(event_text, self.trial_id, seq)
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
        store, reviewer, blind = self.session.store, self.session.reviewer, self.session.blind
        role = "adjudication" if self.adjudicating else None
        try:
            # add_score commits before it returns: only then does the panel say "saved".
            await store.call(lambda s: s.reviews.add_score(trial_id, score, reviewer, role=role, blind=blind))
            detail = await store.call(trial_detail, trial_id)
            if blind:
                detail = blind_detail(detail, self.masker)
        except Exception as exc:
            self.saving = None
            self.notify(f"Score not saved: {exc}", severity="error")
            self._show_detail()
            return
        self.saving = None
        # The grid and cell show the agreed score (several reviewers, adjudication), not this one.
        self.session.scores = await store.call(latest_scores, self.session.suite_id)
        self.queue = [(i, scored or i == trial_id) for i, scored in self.queue]
        if self.trial_id == trial_id:
            self.detail = detail
            self._show_detail()

    def action_rerun_trial(self) -> None:
        if self.session.blind:  # the question names the model and CLI
            self.notify("Blind review: the rerun question names the model. Unblind first (b).", severity="warning")
        elif self.trial_id is not None:
            self.rerun_trial(self.session.grid.trials.get(self.trial_id))

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
        await store.call(lambda s: s.reviews.add_note(trial_id, text, self.session.reviewer))
        if self.trial_id == trial_id:
            detail = await store.call(trial_detail, trial_id)
            self.detail = blind_detail(detail, self.masker) if self.session.blind else detail
            self._show_detail()
        self.notify("Note saved.")

    def action_next_unscored(self) -> None:
        ids = [i for i, _ in self.queue]
        start = ids.index(self.trial_id) + 1 if self.trial_id in ids else 0
        for trial_id, scored in self.queue[start:] + self.queue[:start]:
            if not scored and trial_id != self.trial_id:
                self.open(trial_id)
                return
        self.notify("Nothing left in the adjudication queue." if self.adjudicating else
                    "Nothing left for you to score blind." if self.session.blind else
                    f"Every trial flagged {self.session.flag} has a score." if self.session.flag else
                    "Every finished trial has a score.")

    def action_previous(self) -> None:
        ids = [i for i, _ in self.queue]
        if self.trial_id in ids and ids.index(self.trial_id) > 0:
            self.open(ids[ids.index(self.trial_id) - 1])

    # -- navigation --------------------------------------------------------------------------------

    def action_search(self) -> None:
        search = self.query_one("#search", Input)
        search.display = True
        search.focus()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        if self.session.blind and self._mask(event.value) != event.value:
            # Search reads the stored (unmasked) text: a hidden name would find where it is.
            self.notify("Blind review: that search names a hidden model, CLI or version.", severity="warning")
            return
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
