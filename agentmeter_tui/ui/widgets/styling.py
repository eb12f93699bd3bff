"""Provides :class:`ComponentStyles`: component styles looked up once per theme, not per cell.

``get_component_rich_style`` walks the CSS each call; widgets that draw hundreds of cells or
lines a second (the grid, trial tables, transcript tails) keep the answers until the theme
or their styles change.
"""

from __future__ import annotations

from rich.style import Style


class ComponentStyles:
    """Mixin for widgets: ``self._style(name)``; ``"base"`` is the widget's own style."""

    _styles: dict[str, Style | str]

    def _style(self, name: str, partial: bool = True) -> Style | str:
        cache = self.__dict__.setdefault("_styles", {})
        style = cache.get(name)
        if style is None:
            try:
                style = self.rich_style if name == "base" else self.get_component_rich_style(name, partial=partial)
            except KeyError:
                style = ""
            cache[name] = style
        return style

    def notify_style_update(self) -> None:
        self.__dict__["_styles"] = {}
        super().notify_style_update()  # type: ignore[misc]
