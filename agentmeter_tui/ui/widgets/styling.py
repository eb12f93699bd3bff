"""Provides :class:`ComponentStyles`: component styles looked up once per theme, not per cell.

``get_component_rich_style`` walks the CSS each call; widgets that draw hundreds of cells or
lines a second (the grid, trial tables, transcript tails) keep the answers until the theme
or their styles change.
"""

from __future__ import annotations

from typing import Protocol

from rich.style import Style


class _Styled(Protocol):
    """What the mixin reads of the widget it is mixed into (textual's ``Widget``)."""

    @property
    def rich_style(self) -> Style: ...

    def get_component_rich_style(self, *names: str, partial: bool = False) -> Style: ...


class ComponentStyles:
    """Mixin for widgets: ``self._style(name)``; ``"base"`` is the widget's own style."""

    _styles: dict[str, Style]

    def _style(self: _Styled, name: str, partial: bool = True) -> Style:
        cache: dict[str, Style] = self.__dict__.setdefault("_styles", {})
        style = cache.get(name)
        if style is None:
            try:
                style = self.rich_style if name == "base" else self.get_component_rich_style(name, partial=partial)
            except KeyError:  # a component class no stylesheet defines: no style (a null one adds to others)
                style = Style.null()
            cache[name] = style
        return style

    def notify_style_update(self) -> None:
        self.__dict__["_styles"] = {}
        super().notify_style_update()  # type: ignore[misc]
