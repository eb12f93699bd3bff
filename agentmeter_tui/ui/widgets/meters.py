"""Provides the meter lines of a live pane: token classes, cost and burn, budget bars.

Rendered as Content markup whose colours are theme variables (``$meter-cached``...), so a
theme switch recolours them without code. ``TrialMeter.show`` re-renders only when the
text changes: most ticks change a few numbers, some change nothing.
"""

from __future__ import annotations

from textual.widgets import Static

from ...core.run.control import Meter
from .. import format as fmt

TOKEN_LABELS = (("uncached_input", "in", "meter-uncached"), ("cached_input", "cache", "meter-cached"),
                ("cache_write", "write", "meter-write"), ("output", "out", "meter-output"),
                ("reasoning", "reason", "meter-reasoning"))


def token_markup(tokens: dict[str, int]) -> str:
    parts = [f"[$text-muted]{label}[/] [b ${var}]{fmt.tokens(tokens.get(key, 0))}[/]"
             for key, label, var in TOKEN_LABELS]
    raw = sum(tokens.values())
    return "  ".join(parts) + f"  [$text-muted]=[/] [b]{fmt.tokens(raw)}[/]"


def cost_markup(meter: Meter, burn: tuple[float | None, float | None]) -> str:
    cost = meter.get("cost_usd")
    text = f"[b $meter-usd]{fmt.usd(cost)}[/]"
    reported = meter.get("reported_cost_usd")
    if reported is not None:
        text += f" [$text-muted]reported[/] {fmt.usd(reported)}"
    tok_rate, usd_rate = burn
    text += "  [$text-muted]burn[/] "
    text += "—" if tok_rate is None else f"{fmt.tokens(tok_rate)} tok/min · {fmt.usd(usd_rate)}/min"
    return text


def bar_markup(label: str, fraction: float | None, width: int, var: str, limited: bool = False) -> str:
    if fraction is None:  # no figure to measure yet (not started, ended, unpriced) is not "no limit"
        return f"[$text-muted]{label} {'—' if limited else 'no limit'}[/]"
    colour = "$error" if fraction >= 0.95 else "$warning" if fraction >= 0.8 else f"${var}"
    return (f"[$text-muted]{label}[/] [{colour} on $meter-track]{fmt.bar(fraction, width)}[/]"
            f" {fmt.percent(fraction):>4}")


def budget_fractions(meter: Meter, elapsed: float | None) -> dict[str, float | None]:
    budget = meter.get("budget") or {}
    raw = sum((meter.get("tokens") or {}).values())
    cost = meter.get("cost_usd")
    return {
        "tokens": raw / budget["tokens"] if budget.get("tokens") else None,
        "usd": cost / budget["usd"] if budget.get("usd") and cost is not None else None,
        "time": elapsed / budget["wall_seconds"] if budget.get("wall_seconds") and elapsed is not None else None,
    }


def budget_markup(meter: Meter, elapsed: float | None, width: int) -> str:
    """Three bars in ``width`` cells: tokens, USD and time against the trial's budget."""
    fractions = budget_fractions(meter, elapsed)
    budget = meter.get("budget") or {}
    bar_width = max(4, (width - 3 * 11) // 3)
    return "  ".join(bar_markup(label, fractions[key], bar_width, var, budget.get(limit) is not None)
                     for label, key, limit, var in (("tok", "tokens", "tokens", "meter-uncached"),
                                                    ("usd", "usd", "usd", "meter-usd"),
                                                    ("time", "time", "wall_seconds", "meter-time")))


class TrialMeter(Static):
    """Three lines under a pane's transcript: token classes, cost and burn, budget bars."""

    DEFAULT_CSS = "TrialMeter { height: 3; }"

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self._shown = ""
        self._last: tuple | None = None

    def on_resize(self) -> None:
        if self._last is not None:
            self.show(*self._last)  # the bars are as wide as the pane

    def show(self, meter: Meter, elapsed: float | None, burn: tuple[float | None, float | None]) -> None:
        self._last = (meter, elapsed, burn)
        width = self.size.width or 60
        markup = "\n".join((token_markup(meter.get("tokens") or {}), cost_markup(meter, burn),
                            budget_markup(meter, elapsed, width)))
        if markup != self._shown:
            self._shown = markup
            self.update(markup, layout=False)  # fixed height: no re-layout of the screen
