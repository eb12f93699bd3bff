"""Provides theme files as data: ``themes/*.toml`` -> Textual themes with the app's variables.

A theme file names Textual's base colours and, under ``[variables]``, the app's own: status
colours, the five token-class meter colours, score colours, transcript colours. Every file
is validated (pydantic, errors name file, line and field); a broken one is reported and
skipped, and the app falls back to a theme that loaded. ``APP_VARIABLES`` gives defaults so
the stylesheets parse under any theme, Textual's built-in ones included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, overload

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from textual.color import Color, ColorParseError
from textual.theme import Theme

from ..core.paths import builtin_dir
from ..core.tomlerrors import InputError, load_toml, validate

DEFAULT_DARK = "agentmeter-dark"
DEFAULT_LIGHT = "agentmeter-light"

# Defaults for themes that do not set them (Textual's own themes, partial theme files).
APP_VARIABLES: dict[str, str] = {
    "status-queued": "#8a8f98", "status-running": "#4fa3e0", "status-verifying": "#56b6c2",
    "status-passed": "#5fb86f", "status-failed": "#e0a846", "status-killed": "#c678dd",
    "status-errored": "#e06c75", "status-invalid": "#7f848e",
    "meter-uncached": "#61afef", "meter-cached": "#56b6c2", "meter-write": "#c678dd",
    "meter-output": "#e5c07b", "meter-reasoning": "#d19a66", "meter-usd": "#98c379",
    "meter-time": "#abb2bf", "meter-track": "#3e4451",
    "score-0": "#e06c75", "score-1": "#e5c07b", "score-2": "#61afef", "score-3": "#98c379",
    "flag-thrash": "#ff8f40",
    "ev-assistant": "#d7dae0", "ev-reasoning": "#8a8f98", "ev-tool": "#61afef", "ev-result": "#a0a7b4",
    "ev-error": "#e06c75", "ev-system": "#7f848e", "ev-usage": "#56b6c2",
    "heat-low": "#3b2f45", "heat-high": "#5fb86f",
    # A solid dim text colour: component styles are drawn without their background, where
    # Textual's "$text-muted" (an "auto" colour with alpha) has nothing to contrast against.
    "muted": "#8a8f98",
    "frame": "#3e4451",  # borders of panes and panels that are not selected
}


def _colour(value: str) -> str:
    try:
        Color.parse(value)
    except ColorParseError as exc:
        raise ValueError(f"not a colour: {value!r} ({exc})") from None
    return value


def _known(name: str) -> str:
    if name not in APP_VARIABLES:
        raise ValueError(f"unknown variable '{name}' (known: status-*, meter-*, score-0..3, ev-*, flag-thrash, "
                         "heat-low, heat-high, muted, frame; see ui/themes.py)")
    return name


Colour = Annotated[str, AfterValidator(_colour)]
VariableName = Annotated[str, AfterValidator(_known)]


class ThemeFile(BaseModel):
    """The schema of ``themes/<name>.toml``."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    dark: bool = True
    primary: Colour
    secondary: Colour | None = None
    accent: Colour | None = None
    warning: Colour | None = None
    error: Colour | None = None
    success: Colour | None = None
    foreground: Colour | None = None
    background: Colour | None = None
    surface: Colour | None = None
    panel: Colour | None = None
    boost: Colour | None = None
    variables: dict[VariableName, Colour] = {}

    def to_theme(self) -> Theme:
        return Theme(**self.model_dump(exclude={"variables"}), variables=dict(self.variables))


def theme_dirs() -> list[Path]:
    """The shipped themes and the user's ``$XDG_CONFIG_HOME/agentmeter/themes`` (later wins by name)."""
    from .settings import config_dir

    return [builtin_dir("themes"), config_dir() / "themes"]


def load_theme(path: Path) -> Theme:
    data, text = load_toml(path)
    return validate(ThemeFile, data, path, text).to_theme()


def load_themes(dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """Every theme file in ``dirs`` (later ones override earlier by name) and the errors."""
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    for folder in dirs if dirs is not None else theme_dirs():
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = load_theme(path)
            except InputError as exc:
                errors.append(str(exc))
                continue
            themes[theme.name] = theme
    return list(themes.values()), errors


@overload
def heat_colour(variables: dict[str, str], value: float) -> Color: ...
@overload
def heat_colour(variables: dict[str, str], value: None) -> None: ...
def heat_colour(variables: dict[str, str], value: float | None) -> Color | None:
    """A colour between ``heat-low`` and ``heat-high`` for ``value`` in [0, 1]."""
    if value is None:
        return None
    low = Color.parse(variables.get("heat-low", APP_VARIABLES["heat-low"]))
    high = Color.parse(variables.get("heat-high", APP_VARIABLES["heat-high"]))
    return low.blend(high, max(0.0, min(1.0, value)))
