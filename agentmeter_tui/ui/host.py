"""Provides :class:`AppHost`: what screens, dialogs and widgets call on their app
(:class:`~.app.AgentMeterApp`) beyond Textual's ``App``, named here so that none of them
imports the module that imports them; :func:`host` gives a node's app as one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from textual.app import App
    from textual.signal import Signal

    from .session import UiSession


class AppHost(Protocol):
    session: UiSession
    feed_signal: Signal[Any]  # a TickSummary per applied feed message; None when the feed ends

    def attach_runner(self) -> None: ...

    def open_runs(self) -> None: ...

    def open_compare(self, left: int, right: int) -> None: ...

    async def open_live(self, trial_id: int) -> None: ...

    async def open_review(self, trial_id: int | None, adjudicate: bool = False) -> None: ...


def host(app: App[Any]) -> AppHost:
    """``app`` as the host it is: Textual types a node's ``app`` as any ``App``, and the one App
    these screens run in is an AgentMeterApp (whose conformance app.py checks)."""
    return cast("AppHost", app)
