"""Provides :class:`SessionScreen`: a screen that reads the shared session on a fixed cadence.

Feed messages arrive about ten times a second; screens do not redraw per message. They
note what changed (``on_feed``) and draw on their own timer (``flush``), and only while they
are the current screen, so a hidden screen costs nothing and catches up when shown. A flush
the timer runs may leave slow-moving figures for a later one (``timed``); any other flush
(a resize, a resumed screen, a test) draws everything now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import Screen

from ..host import host

if TYPE_CHECKING:
    from ..live_state import TickSummary
    from ..session import UiSession


class SessionScreen(Screen):
    REFRESH_SECONDS = 0.25

    @property
    def session(self) -> UiSession:
        return host(self.app).session

    def on_mount(self) -> None:
        host(self.app).feed_signal.subscribe(self, self.on_feed, immediate=True)
        self.set_interval(self.REFRESH_SECONDS, self._tick)

    timed = False  # True while the timer's flush runs

    def _tick(self) -> None:
        if self.is_current:
            self.timed = True
            try:
                self.flush()
            finally:
                self.timed = False

    def on_screen_resume(self) -> None:
        self.flush()

    def on_feed(self, summary: TickSummary) -> None:
        """A feed message was applied to the session (override to note what changed)."""

    def flush(self) -> None:
        """Draw what changed since the last flush (override)."""
