"""Provides the UI's settings: theme, reviewer name and keymap, from ``ui.toml``.

The file is ``$AGENTMETER_UI_CONFIG`` or ``~/.config/agentmeter/ui.toml`` (XDG aware); it is
optional. A bad file does not stop the app: the defaults apply and the error is shown.
The reviewer is ``$AGENTMETER_REVIEWER``, else the file's ``reviewer``, else the login name:
the variable wins so one shared config can serve several people.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..core.tomlerrors import InputError, load_toml, validate


class UiSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    theme: str = "agentmeter-dark"
    reviewer: str | None = None
    keymap: dict[str, str] = {}  # binding id -> keys, e.g. {"kill" = "ctrl+k"}


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agentmeter"


def config_path() -> Path:
    configured = os.environ.get("AGENTMETER_UI_CONFIG")
    return Path(configured) if configured else config_dir() / "ui.toml"


def load_settings(path: Path | None = None) -> tuple[UiSettings, str | None]:
    """The settings and, when the file was bad, the error to show."""
    path = path or config_path()
    if not path.is_file():
        return UiSettings(), None
    try:
        data, text = load_toml(path)
        return validate(UiSettings, data, path, text), None
    except InputError as exc:
        return UiSettings(), str(exc)


def reviewer_name(settings: UiSettings) -> str:
    from ..core.review.reviewing import default_reviewer

    if settings.reviewer and not os.environ.get("AGENTMETER_REVIEWER", "").strip():
        return settings.reviewer
    return default_reviewer()
