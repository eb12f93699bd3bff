"""Provides the short text forms the screens show: token counts, dollars, durations,
bars, and the one-line summary of a transcript event.

Plain functions with no Textual import, so every screen formats the same way and the
rules are tested without an app.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.run.control import Meter

BAR_EIGHTHS = " ▏▎▍▌▋▊▉█"
KIND_GLYPH = {
    "assistant": "›", "reasoning": "∴", "tool_call": "$", "tool_result": "↳", "usage": "Σ",
    "error": "✗", "system": "·", "status": "●", "raw": "?",
}
STATUS_GLYPH = {
    "queued": "○", "starting": "◌", "running": "▶", "verifying": "◎", "passed": "✓", "failed": "✗",
    "killed": "☠", "errored": "!", "infra-invalid": "⊘",
}
PREVIEW = 400  # characters of a line kept for one-line views; the store keeps everything


def tokens(value: float | None) -> str:
    """``1234`` -> ``1.2k``: four significant characters fit a narrow meter."""
    if value is None:
        return "—"
    value = float(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            scaled = value / limit
            return f"{scaled:.1f}{suffix}" if scaled < 100 else f"{scaled:.0f}{suffix}"
    return f"{value:.0f}"


def usd(value: float | None, *, unpriced: str = "unpriced") -> str:
    """Dollars with enough digits that a cheap trial does not read as $0.00."""
    if value is None:
        return unpriced
    if value == 0:
        return "$0"
    if abs(value) < 0.01:
        return f"${value:.4f}"
    if abs(value) < 100:
        return f"${value:.3f}" if abs(value) < 1 else f"${value:.2f}"
    return f"${value:,.0f}"


def limit(key: str, value: float) -> str:
    """A budget's or cap's limit as typed, exact and for humans: ``3,000,000 tokens``,
    ``$20``, ``90 s`` (never ``3e+06``)."""
    if key == "usd":
        return f"${value:,.4f}".rstrip("0").rstrip(".")
    number = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
    return f"{number} tokens" if key == "tokens" else f"{number} s" if key == "wall_seconds" else number


def limits(values: dict[str, float]) -> str:
    """Several limits in a line: ``3,000,000 tokens, $20``."""
    return ", ".join(limit(key, value) for key, value in values.items())


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def bar(fraction: float | None, width: int) -> str:
    """A horizontal bar of ``width`` cells filled to ``fraction`` (eighths of a cell)."""
    if width <= 0:
        return ""
    if fraction is None:
        return " " * width
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (BAR_EIGHTHS[part] if part else "")
    return text.ljust(width)


def percent(fraction: float | None) -> str:
    return "—" if fraction is None else f"{fraction * 100:.0f}%"


def clip_words(text: str, width: int) -> str:
    """``text`` in ``width`` cells, cut at a word's end with ``…`` (never mid-word, unless its
    first word alone is wider): ``infra: interrupted: …``, not ``infra: interrupted: th``; a
    reason's own parts count as words (``budget:…``, not ``budge…``)."""
    if len(text) <= width:
        return text
    head = text[:width - 1]
    cut = max(head.rfind(" "), head.rfind("/"), head.rfind(":"))
    return (head[:cut + 1] if cut > 0 else head) + "…"


def first_line(text: str, limit: int = PREVIEW) -> tuple[str, int]:
    """The first non-empty line of ``text`` (cut to ``limit``) and how many lines follow it."""
    stripped = text.strip("\n")
    head, _, rest = stripped.partition("\n")
    more = rest.count("\n") + 1 if rest else 0
    return head[:limit], more


def event_summary(kind: str, text: str, limit: int = PREVIEW) -> str:
    """One line for an event in a live tail: tool calls and results folded, text trimmed."""
    head, more = first_line(text or "", limit)
    if kind == "tool_result":
        if not head and not more:
            return "(no output)"
        return head + (f"  (+{more} lines)" if more else "")
    if kind == "tool_call":
        return head + (" …" if more else "")
    return head + (f" … (+{more})" if more else "")


def meter_raw(meter: Meter) -> int:
    return sum((meter.get("tokens") or {}).values())


def meter_fresh(meter: Meter) -> int:
    tokens_ = meter.get("tokens") or {}
    return sum(tokens_.values()) - int(tokens_.get("cached_input") or 0)


def trial_title(row: Mapping[str, Any]) -> str:
    """``#12 count-lines · solver × reference · t2`` for a meter or a trials row."""
    trial = row.get("trial", row.get("trial_index"))
    task = row.get("task", row.get("task_id"))
    return f"#{row.get('id')} {task} · {row.get('model')} × {row.get('cli')} · t{trial}"
