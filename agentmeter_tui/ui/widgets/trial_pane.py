"""Provides :class:`TrialPane`: one running trial, as a tile of the live screen.

Border title: which trial (task, model, CLI, trial number). Body: the transcript tail as it
streams. Below it the meters. Border subtitle: status, elapsed against the time budget, and
flags such as thrashing. ``sync`` draws only what changed since the last call.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Region
from textual.markup import escape

from ...core.inert import inert
from .. import format as fmt
from ..live_state import TrialLive
from .meters import TrialMeter, budget_fractions
from .tail import TranscriptTail

FLAG_TEXT = {"thrash": "↻ thrashing", "cost-divergence": "≠ cost", "usage-recovered": "↺ usage", "unpriced": "unpriced",
             "rate-limited": "⏸ rate limit"}


def status_markup(status: str, reason: str | None = None) -> str:
    var = {"infra-invalid": "status-invalid", "starting": "status-queued"}.get(status, f"status-{status}")
    glyph = fmt.STATUS_GLYPH.get(status, "?")
    text = f"[b ${var}]{glyph} {status}[/]"
    if reason:
        text += f" [$text-muted]{escape(inert(reason))}[/]"  # a reason can quote agent output
    return text


def flags_markup(flags: list[str]) -> str:
    parts = []
    for flag in flags:
        label = FLAG_TEXT.get(flag, flag)
        parts.append(f"[b $background on $flag-thrash] {label} [/]" if flag == "thrash" else f"[$warning]{label}[/]")
    return " ".join(parts)


class TrialPane(Vertical, can_focus=False):
    ALLOW_MAXIMIZE = True

    def __init__(self, trial_id: int, **kwargs) -> None:
        super().__init__(id=f"pane-{trial_id}", classes="trial-pane", **kwargs)
        self.trial_id = trial_id
        self.shown_seq = 0
        self.seeding = False  # history is being read from the store; live events wait until it is in
        self._status: str | None = None
        self._held: float | None = None
        self._subtitle = ""
        self._title = ""

    def compose(self) -> ComposeResult:
        yield TranscriptTail(id=f"tail-{self.trial_id}", classes="pane-tail")
        yield TrialMeter(classes="pane-meter")

    def show_subtitle(self, markup: str) -> None:
        """Set the border subtitle, repainting only the bottom border row.

        Setting ``border_subtitle`` repaints the whole pane (border, transcript, meters) and the
        subtitle's clock changes every second; this sets the same private field the property
        sets (Textual 8.x) and marks only that row dirty. Without the field, the property."""
        if not hasattr(self, "_border_subtitle") or not self.is_mounted or not self.size:
            self.border_subtitle = markup
            return
        self._border_subtitle = self.render_str(markup).expand_tabs(4).split()[0]
        offset, width, height = self.content_offset, self.outer_size.width, self.outer_size.height
        # refresh() takes regions relative to the content area; the border row lies below it.
        self.refresh(Region(-offset.x, height - 1 - offset.y, width, 1))

    def seed(self, rows: list[list]) -> None:
        """History read from the store for a pane opened mid-trial (older than the feed's tail)."""
        rows = [r for r in rows if r[0] > self.shown_seq]
        if rows:
            self.query_one(TranscriptTail).write_events(rows)
            self.shown_seq = max(self.shown_seq, rows[-1][0])

    def sync(self, trial: TrialLive, now: float, meters: bool = True) -> None:
        """Draw new transcript lines; with ``meters``, the numbers and the border text too
        (the caller redraws numbers less often than lines: re-rendering them is the dearer part)."""
        meter = trial.meter
        new = trial.since(self.shown_seq)
        if new:
            self.query_one(TranscriptTail).write_events(new)
            self.shown_seq = new[-1][0]
        status, held = meter.get("status"), meter.get("budget_hold")
        if not meters and status == self._status and held == self._held:
            return  # a hold that starts or ends shows at once, like a status change
        self._status, self._held = status, held
        node = meter.get("node")  # a fleet's node (swarm sandbox): where it runs
        title = escape(fmt.trial_title(meter) + (f" · {node}" if node else ""))
        if title != self._title:
            self._title = title
            self.border_title = title
        elapsed = trial.elapsed(now)
        self.query_one(TrialMeter).show(meter, elapsed, trial.burn())
        wall = (meter.get("budget") or {}).get("wall_seconds")
        clock = fmt.duration(elapsed) + (f" / {fmt.duration(wall)}" if wall else "")
        parts = [status_markup(meter.get("status", "?"), meter.get("reason")), f"[$text-muted]{clock}[/]"]
        if held and not trial.finished:  # the operator's budget dialog holds its budget kill
            parts.append(f"[b $warning]⏸ budget kill held {max(0, held - (now - trial.received)):.0f} s[/]")
        flags = flags_markup([f for f in meter.get("flags") or [] if f != "unpriced"])
        if flags:
            parts.append(flags)
        subtitle = "  ".join(parts)
        if subtitle != self._subtitle:
            self._subtitle = subtitle
            self.show_subtitle(subtitle)
        self.set_class(trial.finished, "-finished")
        self.set_class("thrash" in (meter.get("flags") or ()), "-thrash")
        fractions = budget_fractions(meter, elapsed)
        self.set_class(any((f or 0) >= 0.8 for f in fractions.values()), "-near-budget")
