"""The run's money on screen: caps against spend and forecast, and paused models and CLIs.

:func:`money_markup` is the run bar's part for them; :class:`HoldBanner` says a held schedule
on the screens without a run bar (cell, review, report); :func:`mark_paused` marks a paused
model's row and a paused CLI's column on the grid. Everything comes from the feed's progress
(``caps``, ``forecast``, ``held``, ``paused_models``, ``paused_clis``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.markup import escape
from textual.widgets import Static

from .. import format as fmt
from ..host import host

if TYPE_CHECKING:
    from ..session import UiSession
    from .grid_table import GridTable

PAUSED = "⏸ "  # before a paused model's or CLI's name on the grid


def _cap_figures(row: dict[str, Any]) -> tuple[str, str, str]:
    """(cap, spent, forecast) of one cap row, in its capped measure (USD first)."""
    if row.get("usd"):
        return fmt.usd(row["usd"]), fmt.usd(row.get("spent_usd")), fmt.usd(row.get("forecast_usd"))
    return fmt.tokens(row.get("tokens")), fmt.tokens(row.get("spent_tokens")), fmt.tokens(row.get("forecast_tokens"))


def cap_text(row: dict[str, Any]) -> str:
    """One cap as plain text: ``run cap $0.50: spent $0.31, forecast $1.20 (passes it)``."""
    cap, spent, forecast = _cap_figures(row)
    name = "run" if row["scope"] == "run" else f"{row['scope']} {row['name']}"
    text = f"{name} cap {cap}: spent {spent}"
    if "forecast_usd" in row:
        text += f", forecast {forecast}" + (" (passes it)" if row.get("forecast_passes") else "")
    return text + (" · REACHED" if row.get("state") == "hit" else "")


def money_markup(progress: Mapping[str, Any], spent_usd: float = 0.0) -> str:
    """The run bar's money part: the tightest cap with spend and forecast (or the forecast
    alone), and what is paused. Empty when there is nothing to say. No figure of the forecast
    shows below ``spent_usd`` (what the run bar says is spent) or the forecast's own spend."""
    parts = []
    caps = sorted(progress.get("caps") or [], key=lambda r: (r.get("state") != "hit", not r.get("forecast_passes"),
                                                              -r.get("share", 0)))
    if caps:
        row = caps[0]
        cap, _spent, forecast = _cap_figures(row)
        name = "cap" if row["scope"] == "run" else f"{row['name']} cap"
        # what is spent is the run bar's totals part: this one stays short enough to fit beside a HELD
        text = f"[$text-muted]{escape(name)}[/] {cap}"
        if "forecast_usd" in row:
            colour = "$error" if row.get("forecast_passes") else "$text"
            text += f" [$text-muted]· forecast[/] [{colour}]{forecast}{' ▲ over' if row.get('forecast_passes') else ''}[/]"
        parts.append(text)  # a reached cap: the run bar's HELD says it, with the figure
    elif (projection := progress.get("forecast") or {}).get("basis"):
        usd = projection.get("usd") or {}
        floor = max(spent_usd or 0.0, usd.get("spent") or 0.0)
        low, projected, high = (max(floor, usd.get(k) or 0.0) for k in ("low", "projected", "high"))
        parts.append(f"[$text-muted]forecast[/] {fmt.usd(projected)} "
                     f"[$text-muted]({fmt.usd(low)}–{fmt.usd(high)})[/]")
    paused = [*(progress.get("paused_models") or []), *(progress.get("paused_clis") or [])]
    if paused:
        parts.append(f"[b $warning]{PAUSED}{escape(', '.join(paused))} paused[/]")
    return " · ".join(parts)


class HoldBanner(Static):
    """One line on a screen without a run bar, shown while the schedule is held (a cap
    reached, the store's disk full) and hidden otherwise."""

    DEFAULT_CSS = "HoldBanner { height: 1; display: none; }"

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self._shown = ""

    def on_mount(self) -> None:
        host(self.app).feed_signal.subscribe(self, self._follow, immediate=True)
        self._follow(None)

    def _follow(self, _summary: object) -> None:
        session = host(self.app).session
        progress = session.live.progress if session.live_mode and not session.live.ended else {}
        held = progress.get("held") or []
        text = ""
        if held:
            hint = " · g then $ raises the run cap" if any("cap" in why for why in held) else ""
            text = (f"[b $background on $error] ❚❚ HELD [/] [$error]{escape(held[0][:100])}[/]"
                    f"[$text-muted]{hint}[/]")
        if text != self._shown:
            self._shown = text
            self.update(text)
            self.display = bool(text)


def paused_scopes(session: UiSession) -> tuple[frozenset[str], frozenset[str]]:
    progress = session.live.progress if session.live_mode and not session.live.ended else {}
    return frozenset(progress.get("paused_models") or ()), frozenset(progress.get("paused_clis") or ())


def mark_paused(table: GridTable, models: frozenset[str], clis: frozenset[str]) -> None:
    """A paused model's row label and a paused CLI's column header start with ``⏸``; the
    others show their plain names (a resume takes the mark away)."""
    from .grid_table import LABEL_COLUMN

    for key, column in table.columns.items():
        if key.value == LABEL_COLUMN:
            continue
        label = f"{PAUSED}{key.value}" if key.value in clis else key.value or ""  # a column's key: its CLI
        if column.label.plain != label:
            column.label = Text(label, style="bold" if key.value in clis else "")
            table.refresh()
    for row_key in table.rows:
        name = row_key.value or ""  # a row's key: its model
        cell = table.get_cell(row_key, LABEL_COLUMN)
        label = f"{PAUSED}{name}" if name in models else name
        if getattr(cell, "plain", cell) != label:
            table.update_cell(row_key, LABEL_COLUMN, Text(label, style=cell.style if isinstance(cell, Text) else ""))
