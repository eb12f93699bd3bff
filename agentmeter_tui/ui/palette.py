"""Provides the command palette's entries: one per action of the app and its screens.

Yielded by ``AgentMeterApp.get_system_commands`` next to Textual's own (theme, keys,
screenshot, quit). Screen-specific entries appear only on the screen where they act.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from textual.app import SystemCommand

from .host import AppHost

if TYPE_CHECKING:
    from textual.screen import Screen


class PaletteHost(AppHost, Protocol):
    """What the palette calls on the app (:class:`~.app.AgentMeterApp`) besides what every screen
    does; named here so that this module does not import the one that imports it."""

    async def action_mode(self, mode: str) -> None: ...

    async def action_pause(self) -> None: ...

    def action_toggle_dark(self) -> None: ...

    def action_help(self) -> None: ...


def app_commands(app: PaletteHost, screen: Screen) -> Iterable[SystemCommand]:
    from .screens.live import LiveScreen
    from .screens.report import ReportScreen
    from .screens.review import ReviewScreen

    yield SystemCommand("Grid", "The model x CLI grid (home)", lambda: app.action_mode("grid"))
    yield SystemCommand("Live panes", "A pane per running trial", lambda: app.action_mode("live"))
    yield SystemCommand("Review", "Read and score finished transcripts", lambda: app.action_mode("review"))
    yield SystemCommand("Report", "Table 2, rubric winrates and charts", lambda: app.action_mode("report"))
    if app.session.live_mode:
        paused = app.session.live.progress.get("paused")
        if paused:
            yield SystemCommand("Resume the schedule", "Start queued trials again", app.action_pause)
        else:
            yield SystemCommand("Pause the schedule", "Start no new trials until resumed (running ones go on)",
                                app.action_pause)
    yield SystemCommand("Toggle light / dark theme", "Switch between the agentmeter themes", app.action_toggle_dark)
    yield SystemCommand("Help: all keys", "Every key of every screen, with binding ids", app.action_help)
    if isinstance(screen, LiveScreen):
        yield SystemCommand("Kill the selected trial", "Asks first; recorded as operator", screen.action_kill)
        yield SystemCommand("Raise the selected trial's budget", "Tokens, USD or time", screen.action_budget)
        yield SystemCommand("Raise every trial's budget", "Running trials and those still to start",
                            screen.action_budget_all)
        yield SystemCommand("Maximize the selected pane", "esc restores", screen.action_maximize)
    if isinstance(screen, ReviewScreen):
        for score in range(4):
            yield SystemCommand(f"Score {score}", "Record a 0-3 rubric score for this trial",
                                lambda s=score: screen.action_score(s))
        yield SystemCommand("Add a note", "A note on this trial", screen.action_note)
        yield SystemCommand("Next unscored trial", "Jump to the next trial without a score", screen.action_next_unscored)
        yield SystemCommand("Previous trial", "The trial before this one", screen.action_previous)
        yield SystemCommand("Search the transcript", "Find text; enter jumps to the next match", screen.action_search)
        yield SystemCommand("Next error or failed tool call", "Jump forward", lambda: screen.action_next_failure(1))
    if isinstance(screen, ReportScreen):
        yield SystemCommand("Switch latest / median selection", "Which trial of a cell counts", screen.action_selection)
        yield SystemCommand("Reload the report", "Build it again from the store", screen.action_reload)
