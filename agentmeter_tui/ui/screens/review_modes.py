"""Provides :class:`ReviewModes`: what blind review, adjudication and compare add to the review
screen (a mixin of :class:`~.review.ReviewScreen`, which owns the widgets and the loading).

Blind: the queue is this reviewer's unscored trials in a seeded order, fixed for the visit;
unblinding asks first and is recorded in the store before anything identifying is drawn.
Adjudication: the queue is the trials whose reviewers disagree; a score given there is final.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..data import TrialDetail, review_queue
from ..host import host
from ..review_data import adjudication_ids, blind_ids
from .dialogs import ConfirmDialog

if TYPE_CHECKING:
    from textual.app import App

    from ..session import UiSession


class ReviewModes:
    session: UiSession
    app: App[Any]
    queue: list[tuple[int, bool]]
    trial_id: int | None
    adjudicating: bool
    threshold: int
    masker: Any
    # of the screen this is mixed into: Textual's, and ReviewScreen.open (what loads a trial)
    notify: Callable[..., None]
    run_worker: Callable[..., object]
    open: Callable[[int | None], None]

    async def _load_queue(self) -> list[tuple[int, bool]]:
        store, session = self.session.store, self.session
        if self.adjudicating:
            ids, self.threshold = await store.call(adjudication_ids, session.suite_id)
            return [(i, False) for i in ids]
        if session.blind:
            # The blind queue is fixed for the visit: scored trials stay in it, marked, in place.
            done = {i for i, scored in self.queue if scored}
            ids = await store.call(blind_ids, session.suite_id, session.reviewer, session.blind_seed)
            kept = [(i, True) for i, _ in self.queue if i in done]
            return kept + [(i, False) for i in ids if i not in done]
        return await store.call(review_queue, session.suite_id, session.flag, session.by_flags)

    def _own(self, detail: TrialDetail) -> TrialDetail:
        """Blind or adjudicating, the score panel shows only this reviewer's own scores (reviews are
        independent; the others' appear in the adjudication panel)."""
        if not (self.session.blind or self.adjudicating):
            return detail
        mine = [s for s in detail.scores if s.reviewer == self.session.reviewer
                and s.adjudicated == self.adjudicating]
        return TrialDetail(detail.row, mine, detail.notes, detail.siblings, detail.extra, detail.events)

    def _mask(self, text: str | None) -> str:
        return self.masker(text) if self.masker is not None and self.session.blind else (text or "")

    # -- modes -------------------------------------------------------------------------------------

    def action_blind(self) -> None:
        if not self.session.blind:
            self.session.blind = True
            self.masker = None
            self.queue = []
            self.notify("Blind review: model, CLI, tokens, cost and flags hidden; your unscored trials, shuffled.")
            self.open(None)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._unblind(), exit_on_error=False)

        self.app.push_screen(ConfirmDialog(
            "Unblind?", "Model, CLI, tokens and cost show again. The unblinding is recorded in the store "
            "(audit) with your name and this trial.", yes="Unblind", danger=False), answered)

    async def _unblind(self) -> None:
        trial_id, reviewer = self.trial_id, self.session.reviewer
        # Recorded (committed) before anything identifying is drawn.
        await self.session.store.call(lambda s: s.reviews.record_unblinding(trial_id, reviewer, "review screen"))
        self.session.blind = False
        self.masker = None
        self.notify("Unblinded (recorded).")
        self.open(trial_id)

    def action_adjudicate(self) -> None:
        self.adjudicating = not self.adjudicating
        self.queue = []
        self.open(None if self.adjudicating else self.trial_id)

    async def action_compare(self) -> None:
        if self.session.blind:
            self.notify("Compare shows models and tokens: unblind first (b).", severity="warning")
            return
        if self.trial_id is None:
            return
        trial_id = self.trial_id
        partner = await self.session.store.call(lambda s: s.reviews.compare_partner(trial_id))
        if partner is None:
            self.notify("No other finished trial of this task to compare with.")
            return
        host(self.app).open_compare(trial_id, partner)
