"""Provides :class:`KeysFooter`: Textual's footer, rebuilt only when the shown keys change,
and fitted to the terminal's width.

Textual's ``Footer`` recomposes all its key widgets whenever the focused widget changes. On
the live screen focus moves between panes that offer the same keys, and that rebuild was
the largest single cost of a keypress under load; this footer compares what it would show
and skips the rebuild when nothing differs.

On a narrow terminal Textual's footer lets the keys past the right edge fall off unseen (at
100 columns the review screen lost half of its). This one goes compact below ``NARROW``
columns, and if the keys still do not fit it shows those that do and makes ``?`` (every key
of every screen) the last one, saying how many are left out.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

NARROW = 140  # columns below which keys lose their padding
HELP_ACTION = "app.help"


def key_width(key: FooterKey, compact: bool) -> int:
    """Cells a key takes: FooterKey's padding (one each side of the key and one after the text;
    compact, one between them) and, compact, the footer's gap of one after it."""
    text = len(key.key_display) + (len(key.description) + (1 if compact else 3) if key.description else 0)
    return text + (1 if compact else 0)


def fit_keys(keys: list[Widget], width: int, compact: bool) -> tuple[list[Widget], int]:
    """The keys that fit in ``width`` cells (the command palette's and ``?`` always among them),
    and how many were left out."""
    plain = [k for k in keys if isinstance(k, FooterKey)]
    if len(plain) != len(keys) or sum(key_width(k, compact) for k in plain) <= width:
        return keys, 0  # grouped keys (none here today) are left as Textual lays them out
    fixed = [k for k in plain if k.has_class("-command-palette") or k.action in (HELP_ACTION, "help")]
    room = width - sum(key_width(k, compact) for k in fixed) - len("+99 ")  # the count goes on ?
    kept: list[Widget] = []
    for key in plain:
        if key in fixed:
            continue
        if key_width(key, compact) > room:
            break
        room -= key_width(key, compact)
        kept.append(key)
    left_out = len(plain) - len(fixed) - len(kept)
    return kept + fixed, left_out


class KeysFooter(Footer):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: tuple | None = None
        self._width = 0

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

    def on_resize(self) -> None:
        width = self.size.width
        if width and width != self._width:
            self._width = width
            self.compact = width < NARROW
            self.call_after_refresh(self.recompose)

    def compose(self) -> Iterable[Widget]:
        keys = list(super().compose())
        width = self.size.width or self.app.size.width
        shown, left_out = fit_keys(keys, width, self.compact)
        for key in shown:
            if left_out and isinstance(key, FooterKey) and key.action in (HELP_ACTION, "help"):
                key.description = f"+{left_out} keys"
        self.styles.grid_size_columns = len(shown)
        yield from shown
