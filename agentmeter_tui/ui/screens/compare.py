"""Provides :class:`CompareScreen`: two trials of one task side by side (``c`` in review,
``agentmeter compare A B``).

Above the columns, each trial's totals: tokens, steps, repeated calls and the file it read
most, so "passes in 369k tokens" beside "fails after 4.8M tokens, 30 reads of one file" reads
at a glance. Below them, each trial's outcome and verifier output.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.markup import escape
from textual.widgets import Static

from ...core.review.compare import Comparison, TrialSteps
from ...core.inert import inert
from .. import format as fmt
from ..review_data import compare, compare_more
from ..widgets.compare_view import CompareView
from ..widgets.footer import KeysFooter
from ..widgets.review_panels import ReviewPanel
from ..widgets.trial_pane import status_markup
from .base import SessionScreen

VERIFIER_LINES = 6


def side_summary(side: TrialSteps) -> str:
    row = side.trial
    most = side.most_read
    read = f" · most read [b $warning]{escape(most[0])} ×{most[1]}[/]" if most and most[1] > 1 else ""
    more = "" if side.complete else "≥"  # its later events are still being read
    return (f"[b]#{row['id']}[/] {escape(row['model'])} × {escape(row['cli'])} · t{row['trial_index']}  "
            f"{status_markup(row['status'], row.get('reason'))}\n"
            f"[b $accent]{more}{fmt.tokens(side.total_tokens)}[/] tokens · {more}{len(side.steps)} steps · "
            f"[$warning]{side.repeated_calls}[/] repeated calls{read} · "
            f"[$meter-usd]{fmt.usd(row.get('cost_usd'))}[/]")


def outcome_markup(side: TrialSteps) -> str:
    row = side.trial
    lines = inert((row.get("verifier_output") or "").rstrip()).splitlines()
    shown = "\n".join(escape(line) for line in lines[:VERIFIER_LINES])
    more = f"\n[$text-muted]… {len(lines) - VERIFIER_LINES} more lines[/]" if len(lines) > VERIFIER_LINES else ""
    verdict = "no verifier verdict" if row.get("verifier_exit") is None else f"verifier exit {row['verifier_exit']}"
    return f"{status_markup(row['status'], row.get('reason'))} · {verdict}\n{shown or '(no output)'}{more}"


class CompareScreen(SessionScreen):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="compare-back", tooltip="Back to review"),
        Binding("d", "divergence", "Divergence", id="compare-divergence",
                tooltip="Jump to the first step where the two trials differ"),
    ]

    def __init__(self, left: int, right: int) -> None:
        super().__init__(id="compare-screen")
        self.left, self.right = left, right
        self.comparison: Comparison | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="compare-title", classes="screen-title")
        with Horizontal(id="compare-heads"):
            yield Static("", id="compare-head-left", classes="compare-head")
            yield Static("", id="compare-head-right", classes="compare-head")
        yield CompareView(id="compare-view")
        with Horizontal(id="compare-outcomes"):
            yield ReviewPanel("Outcome", id="compare-outcome-left", classes="panel compare-outcome")
            yield ReviewPanel("Outcome", id="compare-outcome-right", classes="panel compare-outcome")
        yield KeysFooter()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(CompareView).focus()
        self.query_one("#compare-title", Static).update(f"[b]Compare[/] #{self.left} and #{self.right}: loading…")
        self.run_worker(self._load(), group="compare", exclusive=True, exit_on_error=False)

    async def _load(self) -> None:
        """The first steps of both trials, drawn at once; then the rest, a range at a time (a
        million-event trial is read in the background, the columns grow as it comes)."""
        store = self.session.store
        try:
            reader = await store.call(compare, self.left, self.right)
        except KeyError as exc:
            self.query_one("#compare-title", Static).update(f"[b]Compare[/]: {escape(str(exc))}")
            return
        self.comparison = comparison = reader.comparison
        self.query_one("#compare-outcome-left", Static).update(outcome_markup(comparison.left))
        self.query_one("#compare-outcome-right", Static).update(outcome_markup(comparison.right))
        self.query_one(CompareView).load(comparison)
        self._show_progress()
        while not reader.complete:
            await store.call(compare_more, reader)
            self.query_one(CompareView).grown()
            self._show_progress()

    def _show_progress(self) -> None:
        comparison = self.comparison
        assert comparison is not None
        left, right = comparison.left.trial, comparison.right.trial
        same = left["task_id"] == right["task_id"]
        complete = comparison.left.complete and comparison.right.complete
        if comparison.divergence is not None:
            where = f"first divergence at step [b $warning]{comparison.divergence + 1}[/] (▶)"
        elif complete:
            where = "identical steps"
        else:
            where = f"the same first {min(len(comparison.left.steps), len(comparison.right.steps)):,} steps so far"
        reading = "" if complete else " [$text-muted]· reading…[/]"
        self.query_one("#compare-title", Static).update(
            f"[b]Compare[/] {escape(left['task_id'])}"
            + ("" if same else f" [$warning]and {escape(right['task_id'])} (different tasks)[/]")
            + f" [$text-muted]│[/] {where}{reading} [$text-muted]│ step · call · tokens · running total[/]")
        self.query_one("#compare-head-left", Static).update(side_summary(comparison.left))
        self.query_one("#compare-head-right", Static).update(side_summary(comparison.right))

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_divergence(self) -> None:
        comparison = self.comparison
        if comparison is None or comparison.divergence is None:
            complete = comparison is not None and comparison.left.complete and comparison.right.complete
            self.notify("The two trials take the same steps." if complete else
                        "The same steps so far; the rest is still being read.")
            return
        self.query_one(CompareView).show_row(comparison.divergence)
