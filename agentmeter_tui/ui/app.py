"""Provides :class:`AgentMeterApp` (wiring only) and :func:`run_app`, the entry point.

The app owns a :class:`~.session.UiSession`, registers themes and the keymap, starts the feed
client when a runner is attached, and routes: feed messages into the session and out to the
screens through ``feed_signal``; keys to screens (modes ``grid``, ``live``, ``review``,
``report``). Everything else lives in screens and widgets.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeGuard, TypeVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.signal import Signal

from ..core.run.control import FeedMessage
from .session import FeedClient, UiSession
from .settings import UiSettings, load_settings, reviewer_name
from .themes import APP_VARIABLES, DEFAULT_DARK, DEFAULT_LIGHT, load_themes

if TYPE_CHECKING:  # for the checker only: each is imported when its screen is first shown
    from .screens.cell import CellScreen
    from .screens.fleet import FleetScreen
    from .screens.live import LiveScreen
    from .screens.review import ReviewScreen

STYLES = Path(__file__).parent / "styles"
# Fewer, larger young collections and rarer full ones: the feed allocates fast, and a full
# collection is a pause the operator sees as a stuck key.
GC_THRESHOLDS = (10_000, 20, 100)


def _screen(module: str, name: str) -> Callable[[], Screen]:
    """A mode's screen, imported when the mode is first shown: the app opens on one screen, and
    importing the others (the report's charts, review, compare) cost half of the time to the
    first frame on the paper grid's store."""

    def make() -> Screen:
        return getattr(importlib.import_module(f"{__package__}.screens.{module}"), name)()

    return make


S = TypeVar("S", bound=Screen)


class _Shown(Generic[S]):
    """Tells whether a screen is a ``screens.<module>.<name>`` (the class ``S``), without importing
    that module (a screen not imported yet cannot be the one shown); the checker then knows
    the screen as an ``S``."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, screen: Screen) -> TypeGuard[S]:
        loaded = sys.modules.get(f"{__package__}.screens.{self.module}")
        return loaded is not None and isinstance(screen, getattr(loaded, self.name))


_cell_shown: _Shown[CellScreen] = _Shown("cell", "CellScreen")
_fleet_shown: _Shown[FleetScreen] = _Shown("fleet", "FleetScreen")
_live_shown: _Shown[LiveScreen] = _Shown("live", "LiveScreen")
_review_shown: _Shown[ReviewScreen] = _Shown("review", "ReviewScreen")


class AgentMeterApp(App):
    TITLE = "agentmeter"
    CSS_PATH = [STYLES / name for name in ("app.tcss", "grid.tcss", "live.tcss", "review.tcss", "compare.tcss",
                                           "report.tcss")]
    MODES = {"grid": _screen("grid", "GridScreen"), "live": _screen("live", "LiveScreen"),
             "review": _screen("review", "ReviewScreen"), "report": _screen("report", "ReportScreen")}
    BINDINGS = [
        Binding("g", "mode('grid')", "Grid", id="grid", tooltip="Go to the model x CLI grid (home), from every screen (review too)"),
        Binding("l", "mode('live')", "Live", id="live", tooltip="A pane per running trial"),
        Binding("r", "mode('review')", "Review", id="review", tooltip="Read and score finished transcripts"),
        Binding("t", "mode('report')", "Report", id="report", tooltip="Tables and charts"),
        Binding("p", "pause", "Pause", id="pause", tooltip="Pause or resume the schedule (running trials go on)"),
        Binding("question_mark,f1", "help", "Keys", id="help", tooltip="Every key of every screen"),
        Binding("ctrl+t", "toggle_dark", "Theme", id="theme", show=False, tooltip="Switch light / dark theme"),
        Binding("q", "quit", "Quit", id="quit", tooltip="Quit the TUI: an attached runner keeps going; the demo's run stops with it (asks first)"),
    ]

    def __init__(self, session: UiSession, *, screen: str = "grid", trial: int | None = None,
                 settings: UiSettings | None = None, notices: Iterable[str] = (), connect: bool = True,
                 tune_gc: bool = False, compare: tuple[int, int] | None = None, versus: Path | None = None) -> None:
        super().__init__()
        self.connect = connect  # False: tests and screenshots feed messages themselves
        self.tune_gc = tune_gc  # True for the real app (run_app) and the load benchmark
        self.session = session
        self.settings = settings or UiSettings()
        self.first_screen, self.first_trial, self.first_compare = screen, trial, compare
        self.versus = versus  # the store this one's run is compared with (report --compare A B --tui): A
        self.notices = list(notices)
        self.feed_signal: Signal[Any] = Signal(self, "feed")

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_VARIABLES)

    async def on_mount(self) -> None:
        themes, errors = load_themes()
        for theme in themes:
            self.register_theme(theme)
        wanted = self.settings.theme
        if wanted not in self.available_themes:
            errors.append(f"theme '{wanted}' is not available; using {DEFAULT_DARK}")
            wanted = DEFAULT_DARK if DEFAULT_DARK in self.available_themes else "textual-dark"
        self.theme = wanted
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)
        for text in [*self.notices, *errors]:
            self.notify(text, severity="warning" if text in errors else "information", timeout=8)
        await self.session.load()
        if self.session.live_mode and self.connect:
            self._follow_feed()
        if self.first_screen in ("review", "adjudicate"):
            await self.open_review(self.first_trial, adjudicate=self.first_screen == "adjudicate")
        elif self.first_screen == "compare" and self.first_compare:
            await self.switch_mode("review")
            self.open_compare(*self.first_compare)
        elif self.first_screen == "runs" and self.versus is not None:
            await self.switch_mode("report")
            self.open_runs()
        else:
            await self.switch_mode(self.first_screen)
        if self.tune_gc:
            # Everything built so far lives as long as the app: keep it out of full collections,
            # which otherwise walk it all every few seconds under a fast feed (100+ ms pauses).
            gc.freeze()
            gc.set_threshold(*GC_THRESHOLDS)

    # -- feed ----------------------------------------------------------------------------------

    def _follow_feed(self) -> None:
        client = FeedClient(self.session.db, self._feed_message, self._feed_ended)
        self.run_worker(client.run(), group="feed", exclusive=True, exit_on_error=False)

    def attach_runner(self) -> None:
        """Follow the runner just started on this store (a rerun on a finished store)."""
        self.session.live_mode = True
        self.session.live.ended = None
        if self.connect:
            self._follow_feed()
        self.feed_signal.publish(None)

    def _feed_message(self, message: FeedMessage) -> None:
        summary = self.session.apply(message)
        self.feed_signal.publish(summary)
        if message["type"] == "snapshot":  # (re)attached: what did the store get meanwhile?
            self._refresh_from_store()

    def _feed_ended(self, status: str, error: str | None) -> None:
        live = self.session.live
        live.ended = status
        if status == "lost":
            self.notify(f"Lost the runner: {error}. Trials it ran keep running; `agentmeter attach` reconnects.",
                        severity="error", timeout=10)
        else:
            self.notify(f"The schedule {status}.", timeout=6)
        self.feed_signal.publish(None)
        self._refresh_from_store()

    def _refresh_from_store(self) -> None:
        async def refresh() -> None:
            self.feed_signal.publish(await self.session.refresh())

        self.run_worker(refresh(), group="store-truth", exit_on_error=False)

    # -- navigation ------------------------------------------------------------------------------

    async def action_mode(self, mode: str) -> None:
        if self.session.blind and mode != "review":
            self.notify("Blind review: other screens show models and costs. Unblind first (b).", severity="warning")
            return
        screen = self.screen
        if mode == "review" and _live_shown(screen):
            trial = self.session.live.trials.get(screen.selected_trial() or -1)
            if trial is not None and trial.finished:
                await self.open_review(trial.id)  # r on a finished pane reviews that trial
                return
        self._leave_cell()
        if self.current_mode != mode:
            await self.switch_mode(mode)

    def _leave_cell(self) -> None:
        """A cell or fleet screen sits on the grid's (or live) stack; leaving for another screen closes it."""
        while _cell_shown(self.screen) or _fleet_shown(self.screen):
            self.pop_screen()

    async def open_review(self, trial_id: int | None, adjudicate: bool = False) -> None:
        self._leave_cell()
        await self.switch_mode("review")
        screen = self.screen
        if _review_shown(screen):
            screen.adjudicating = adjudicate
            screen.open(trial_id)

    def open_compare(self, left: int, right: int) -> None:
        from .screens.compare import CompareScreen

        self.push_screen(CompareScreen(left, right))

    def open_runs(self) -> None:
        """Two runs compared: this store's (B) against ``versus`` (A)."""
        if self.versus is None:
            self.notify("No run to compare with: open the TUI with `agentmeter report --compare A.db B.db --tui`.",
                        severity="warning", timeout=8)
            return
        from .screens.runs import RunsScreen

        self.push_screen(RunsScreen(self.versus))

    async def open_live(self, trial_id: int) -> None:
        self._leave_cell()
        await self.switch_mode("live")
        screen = self.screen
        if _live_shown(screen):
            screen.pin(trial_id)

    # -- actions ---------------------------------------------------------------------------------

    async def action_pause(self) -> None:
        session = self.session
        if not session.live_mode or session.live.ended:
            self.notify("No runner attached: nothing to pause.", severity="warning")
            return
        op: Literal["pause", "resume"] = "resume" if session.live.progress.get("paused") else "pause"
        try:
            reply = await session.request(op)
        except Exception as exc:
            self.notify(f"{op} failed: {exc}", severity="error")
            return
        # The feed only sends progress with other news; show the new state now.
        session.live.progress["paused"] = reply.get("paused", op == "pause")
        self.notify("Schedule paused: no new trials start." if op == "pause" else "Schedule resumed.")
        self.feed_signal.publish(None)

    def quit_text(self) -> str:
        """What ``q`` does on this app, as the help says it: the demo's runner dies with the
        app; an attached runner keeps going."""
        session = self.session
        if not session.live_mode or session.live.ended:
            return "Quit (no runner is attached: nothing else stops)"
        if session.stop_runner_on_exit:
            return "Quit and stop the demo's run (asks first while trials run or wait: they end infra-invalid)"
        return "Quit the TUI; the runner keeps going (`agentmeter attach` shows it again)"

    def action_help(self) -> None:
        from .screens.cell import CellScreen
        from .screens.compare import CompareScreen
        from .screens.dialogs import BudgetDialog, ConfirmDialog, NoteDialog
        from .screens.fleet import FleetScreen
        from .screens.grid import GridScreen
        from .screens.help import HelpScreen
        from .screens.live import LiveScreen
        from .screens.money import CapDialog, RerunDialog
        from .screens.report import ReportScreen
        from .screens.review import ReviewScreen
        from .screens.runs import RunsScreen
        from .widgets.transcript_view import TranscriptView

        anywhere: list[BindingType] = [replace(b, tooltip=self.quit_text()) if isinstance(b, Binding) and b.id == "quit"
                                       else b for b in self.BINDINGS]
        sections = [("grid", GridScreen.BINDINGS), ("cell", CellScreen.BINDINGS),
                    ("live", LiveScreen.BINDINGS), ("fleet", FleetScreen.BINDINGS), ("review", ReviewScreen.BINDINGS),
                    ("transcript", TranscriptView.BINDINGS), ("compare", CompareScreen.BINDINGS),
                    ("report", ReportScreen.BINDINGS), ("runs compared", RunsScreen.BINDINGS), ("anywhere", anywhere),
                    ("dialogs", ConfirmDialog.BINDINGS + NoteDialog.BINDINGS + BudgetDialog.BINDINGS
                     + CapDialog.BINDINGS[len(BudgetDialog.BINDINGS):] + RerunDialog.BINDINGS)]
        # the screen in use first (review: with its transcript's keys), then the keys of every
        # screen, then the other screens'
        here = next((i for i, (_, bindings) in enumerate(sections)
                     if bindings is getattr(type(self.screen), "BINDINGS", None)), None)
        first = sections[here: here + 2 if sections[here][0] == "review" else here + 1] if here is not None else []
        first.append(("anywhere", anywhere))
        sections = [*first, *(s for s in sections if s not in first)]
        self.push_screen(HelpScreen(sections, self.settings.keymap))

    def action_toggle_dark(self) -> None:
        self.theme = DEFAULT_LIGHT if self.current_theme.dark else DEFAULT_DARK

    async def action_quit(self) -> None:
        """Quit; the demo's runner is the app's own and stops with it, so while any of its trials
        runs or waits, ask first (an attached runner keeps going: nothing to ask)."""
        session = self.session
        if not (session.stop_runner_on_exit and session.live_mode and not session.live.ended):
            self.exit()
            return
        from .screens.dialogs import ConfirmDialog

        if isinstance(self.screen, ConfirmDialog) and self.screen.question.startswith("Quit"):
            return  # q again while it asks: the question stands
        progress = session.live.progress
        running = progress.get("running") or sum(not t.finished for t in session.live.trials.values())
        queued = progress.get("queued") or 0
        if not running and not queued:
            await self._stop_demo_and_exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._stop_demo_and_exit(), exit_on_error=False)

        self.push_screen(ConfirmDialog(
            "Quit and stop the demo's run?",
            f"The demo's runner stops with the app: its {running} running trial(s) end infra-invalid "
            f"and {queued} queued never start. (`agentmeter run` and `attach` keep their runner going.)",
            yes="Quit and stop"), answered)

    async def _stop_demo_and_exit(self) -> None:
        try:
            await self.session.request("stop")  # the demo's runner is a throwaway: stop it with the demo
        except Exception:
            pass
        self.exit()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from .palette import app_commands

        yield from app_commands(self, screen)
        yield from super().get_system_commands(screen)


def run_app(db: Path, mode: str = "live", *, trial: int | None = None, suite: str | None = None,
            screen: str | None = None, demo: bool = False, notices: Iterable[str] = (), blind: bool = False,
            seed: int | None = None, compare: tuple[int, int] | None = None, flag: str | None = None,
            by_flags: bool = False, versus: Path | None = None) -> int:
    """Open the TUI on ``db``: ``mode="live"`` attaches to its runner, ``"review"`` reads the store only."""
    settings, error = load_settings()
    session = UiSession(Path(db), reviewer=reviewer_name(settings), live=mode == "live", suite_id=suite,
                      on_exit_stop_runner=demo, blind=blind, blind_seed=seed, flag=flag, by_flags=by_flags)
    app = AgentMeterApp(session, screen=screen or ("review" if mode == "review" else "grid"), trial=trial,
                        settings=settings, notices=[*notices, *([error] if error else [])], tune_gc=True,
                        compare=compare, versus=versus)
    try:
        app.run()
    finally:
        session.close()
    return app.return_code or 0
