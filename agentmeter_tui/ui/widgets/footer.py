"""Provides :class:`KeysFooter`: Textual's footer, rebuilt only when the shown keys change.

Textual's ``Footer`` recomposes all its key widgets whenever the focused widget changes. On
the live screen focus moves between panes that offer the same keys, and that rebuild was
the largest single cost of a keypress under load; this footer compares what it would show
and skips the rebuild when nothing differs.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: tuple | None = None

    def _signature(self, screen: Screen) -> tuple:
        return tuple((binding.key, binding.action, binding.description, enabled)
                     for (_, binding, enabled, _) in screen.active_bindings.values() if binding.show)

    def bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen and screen.app.app_focus:
            signature = self._signature(screen)
            if signature == self._shown and self._bindings_ready:
                return
            self._shown = signature
        super().bindings_changed(screen)
