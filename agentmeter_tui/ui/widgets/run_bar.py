"""Provides :class:`RunBar`: the one-line run summary at the top of the grid and live screens.

Suite and run, the connection to the runner (live, paused, held and why, finished, lost, or
store only),
progress, totals and the burn rate of everything running. Redrawn by its screen's refresh
cadence, and only when the text changed; the figures that move with every meter (tokens,
USD, burn) at most once a second, while a change of connection or progress shows at once.
Building the line is not free (its width is measured to drop parts on a narrow terminal),
and at ten flushes a second it was a sizeable part of a live screen with nothing else to do.
"""

from __future__ import annotations

import time

from textual.content import Content
from textual.markup import escape
from textual.widgets import Static

from .. import format as fmt
from ..preparation import build_progress
from ..session import UiSession
from .money import money_markup


def connection_markup(session: UiSession, held_chars: int = 80) -> str:
    live = session.live
    if not session.live_mode:
        return "[$text-muted]○ store only[/]"
    if live.ended == "lost":
        return "[b $error]✗ runner lost[/]"
    if live.ended:
        return f"[b $status-passed]■ {live.ended}[/]"
    if not live.connected:
        return "[$text-muted]… connecting[/]"
    if live.progress.get("stopping"):
        return "[b $warning]■ stopping[/]"
    if held := live.progress.get("held"):  # our side holds new trials back: say why
        why = held[0] if len(held[0]) <= held_chars else held[0][:held_chars - 1] + "…"
        return f"[b $background on $error] ❚❚ HELD [/] [$error]{escape(why)}[/]"
    if live.progress.get("paused"):
        return "[b $background on $warning] ❚❚ PAUSED [/]"
    return "[b $status-running]● live[/]"


def preparing_text(session: UiSession) -> str | None:
    """What the runner prepares before its first trial (a task image's build and its step),
    while it does; None once the schedule runs (its progress no longer says ``preparing``)."""
    live = session.live
    if not session.live_mode or live.ended or not live.progress.get("preparing"):
        return None
    return build_progress(live.prepared or [str(live.progress["preparing"])])


def run_bar_markup(session: UiSession, width: int) -> str:
    grid = session.grid
    totals = grid.totals()
    progress = session.live.progress
    done = progress.get("done", totals.done) if session.live_mode and progress else totals.done
    total = progress.get("total", totals.total) if session.live_mode and progress else totals.total
    running = progress.get("running", totals.running) if progress else totals.running
    name = escape(str(session.overview.name or session.suite_id or "no suite"))
    fraction = done / total if total else None
    queued = f" [$text-muted]· {progress.get('queued')} queued[/]" if progress.get("queued") else ""
    preparing = preparing_text(session)
    # before the first trial there is no 0/0 to show: what the runner builds instead
    counts = (f"[b $warning]⚙ preparing[/] {escape(preparing)}" if preparing else
              f"[b]{done}[/]/{total} [$status-passed on $meter-track]{fmt.bar(fraction, 12)}[/]"
              f" [$status-running]▶ {running}[/]{queued}")
    short_counts = (f"[b $warning]⚙[/] {escape(preparing)}" if preparing else
                    f"[b]{done}[/]/{total} [$status-running]▶ {running}[/]")
    # (markup, rank): on a narrow terminal the parts of highest rank go first, so the line
    # never runs off the edge: the reviewer, the burn rate, the long forms of the name and the
    # progress, then the forecast and caps, then the held reason's tail; the spend and cost go
    # last of all.
    parts = [(f"[b $accent]agentmeter[/] [b]{name}[/]"
              + (f" [$text-muted]run {session.live.run_id}[/]" if session.live.run_id else ""), 0),
             (connection_markup(session), 0), (counts, 0),
             (f"{fmt.tokens(totals.raw)} tok · [$meter-usd]{fmt.usd(totals.usd)}[/]", 1)]
    if session.live_mode and not session.live.ended and (money := money_markup(progress, totals.usd or 0.0)):
        parts.append((money, 2))  # caps, forecast, paused models and CLIs
    if session.live_mode and not session.live.ended:
        burn = session.live.totals()
        parts.append((f"[$text-muted]burn[/] {fmt.tokens(burn['tokens_per_min'])} tok/min · "
                      f"{fmt.usd(burn['usd_per_min'])}/min", 3))
    parts.append((f"[$text-muted]reviewer[/] {escape(session.reviewer)}", 4))
    for step in ("reviewer", "burn", "short", "money", "held", "totals"):
        markup = " [$text-muted]│[/] ".join(text for text, _ in parts)
        if Content.from_markup(markup).cell_length <= width:
            return markup
        if step in ("short", "held"):  # the name alone and the counts without their bar; then why held, in brief
            short = {0: f"[b]{name}[/]", 2: short_counts} if step == "short" else \
                {1: connection_markup(session, held_chars=24)}
            parts = [(short[i], 0) if i in short else part for i, part in enumerate(parts)]
        else:
            rank = {"reviewer": 4, "burn": 3, "money": 2, "totals": 1}[step]
            parts = [(text, r) for text, r in parts if r != rank]
    return " [$text-muted]│[/] ".join(text for text, _ in parts)


FIGURES_EVERY = 1.0  # seconds between redraws for the moving figures alone


def run_bar_state(session: UiSession, width: int) -> tuple:
    """What must show at once when it changes: connection, progress counts, the width."""
    progress = session.live.progress
    return (connection_markup(session), width, session.live.run_id, session.overview.name, session.suite_id,
            *(progress.get(key) for key in ("done", "total", "running", "queued", "preparing")))


class RunBar(Static):
    DEFAULT_CSS = "RunBar { height: 1; }"

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self._shown = ""
        self._state: tuple = ()
        self._at = 0.0  # monotonic time the line was last built

    def show(self, session: UiSession, timed: bool = False) -> None:
        """Redraw if the line changed; on a timer's flush (``timed``), for the figures alone at
        most once a second."""
        width = self.size.width or 120
        state = run_bar_state(session, width)
        if timed and state == self._state and time.monotonic() - self._at < FIGURES_EVERY:
            return
        self._state, self._at = state, time.monotonic()
        markup = run_bar_markup(session, width)
        if markup != self._shown:
            self._shown = markup
            self.update(markup, layout=False)  # one fixed line: no re-layout of the screen
