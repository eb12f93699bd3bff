"""What the site's pages show, prepared from one store and its report: names (or their blind
labels), the Table-2 rows with their intervals, the methodology that makes the table
reproducible, and per trial its transcript folded into steps.

Agent output is untrusted: it reaches the pages only through Jinja2's autoescaping, as text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import vocab
from ...metrics.intervals import TOO_FEW
from ...usage import TOKEN_CLASSES
from ...vocab import TIERS
from ..render import DASH, fmt_score, fmt_tokens, fmt_usd
from ..report import Report

# A tool call and the results after it are one step, folded (opened on demand).
TOOL_CALL, TOOL_RESULT = vocab.EventKind.TOOL_CALL.value, vocab.EventKind.TOOL_RESULT.value
ERROR = vocab.EventKind.ERROR.value


@dataclass
class Names:
    """Model and CLI names as the site shows them: themselves, or stable labels in blind mode, with
    every other mention of an identity in free text masked."""

    blind: bool
    labels: dict[str, str] = field(default_factory=dict)
    mask: Callable[[str | None], str] | None = None  # a Masker (picklable: pages are written by workers)

    @classmethod
    def for_report(cls, report: Report, blind: bool, masker: Callable[[str | None], str] | None) -> Names:
        if not blind:
            return cls(False)
        labels: dict[str, str] = {}
        for n, model in enumerate(dict.fromkeys(r.model for r in report.configurations), 1):
            labels[model] = f"model-{n}"
        for n, cli in enumerate(dict.fromkeys(r.cli for r in report.configurations), 1):
            labels[cli] = f"cli-{n}"
        return cls(True, labels, masker)

    def __call__(self, name: str) -> str:
        return self.labels.get(name, name) if self.blind else name

    def suite(self, suite_id: str) -> str:
        """The suite as headers and titles show it: a pseudonym in blind mode (its id may name
        the models it compares)."""
        return "blind-suite" if self.blind else suite_id

    def text(self, text: str | None) -> str:
        return self.mask(text) if self.blind and self.mask is not None else (text or "")


def _bounds(interval: Any, fmt: Callable[[float | None], str]) -> str:
    if interval is not None and interval.too_few:
        return TOO_FEW
    if interval is None or (interval.low is None and interval.high is None):
        return DASH
    return f"{fmt(interval.low)} – {'∞' if interval.high is None else fmt(interval.high)}"


def _percent(share: float | None) -> str:
    return DASH if share is None else f"{share * 100:.1f}%"


def table_rows(report: Report, names: Names) -> list[dict[str, Any]]:
    """One row per configuration, each cell with the text shown and the value it sorts by."""
    iv = report.intervals
    rows = []
    for n, r in enumerate(report.configurations):
        c = r.config
        cells = [
            (names(r.model), names(r.model)), (names(r.cli), names(r.cli)),
            (f"{r.passes}/{r.n_tasks}", r.passes),
            *((f"{r.passes_by_tier[t]}", r.passes_by_tier[t]) for t in TIERS),
            (fmt_tokens(r.tokens_per_pass), r.tokens_per_pass), (fmt_usd(r.usd_per_pass), r.usd_per_pass),
            *((fmt_score(r.tier_scores[t]), r.tier_scores[t]) for t in TIERS),
            (fmt_score(r.ams), r.ams),
            ("best" if r.delta_best is not None and fmt_score(r.delta_best) == fmt_score(0.0) else fmt_score(r.delta_best),
             r.delta_best),
        ]
        if report.rubric is not None:
            cells.append((fmt_score(r.rubric_winrate), r.rubric_winrate))
        if iv is not None:
            cells += [(_bounds(iv.bounds["passes"][c], lambda v: f"{v:g}"), iv.bounds["passes"][c].low),
                      (_bounds(iv.bounds["usd_per_pass"][c], fmt_usd), iv.bounds["usd_per_pass"][c].low),
                      (_bounds(iv.bounds["ams"][c], fmt_score), iv.bounds["ams"][c].low),
                      (_percent(iv.first[c]), iv.first[c]), (_percent(iv.top3[c]), iv.top3[c])]
        rows.append({"href": f"config/{n + 1}.html",
                     "cells": [{"text": text, "sort": "" if value is None else value} for text, value in cells]})
    return rows


def table_header(report: Report) -> list[str]:
    header = ["Model", "CLI", "Pass", "P(E)", "P(M)", "P(H)", "Tok/P", "USD/P", "S_E", "S_M", "S_H", "AMS", "Δbest"]
    if report.rubric is not None:
        header.append("Winrate")
    if report.intervals is not None:
        header += ["Pass 95% CI", "USD/P 95% CI", "AMS 95% CI", "P(1st)", "P(top 3)"]
    return header


def rubric_view(report: Report, names: Names) -> dict[str, Any] | None:
    rubric = report.rubric
    if rubric is None or not rubric.medians:
        return None
    configs = [c for c in rubric.configs if c in rubric.standings]
    rows = []
    for task in rubric.tasks:
        if task not in rubric.winners:
            continue
        winners = set(rubric.winners[task])
        rows.append({"task": names.text(task), "tie": len(winners) > 1,
                     "cells": [{"text": "" if (c, task) not in rubric.medians else f"{rubric.medians[(c, task)]:g}",
                                "win": c in winners} for c in configs]})
    standings = [{"name": f"{names(c[0])} / {names(c[1])}", "wins": s.wins, "losses": s.losses,
                  "winrate": fmt_score(s.winrate)} for c in configs if (s := rubric.standings.get(c))]
    gate = None if rubric.gate is None else {"passed": rubric.gate.passed, "message": names.text(rubric.gate.message)}
    return {"configs": [f"{names(c[0])} / {names(c[1])}" for c in configs], "rows": rows, "standings": standings,
            "gate": gate, "scored": rubric.trials_scored}


def data_checksum(rows: Iterable[Iterable[Any]]) -> str:
    """sha256 over the rows the tables are computed from, in a fixed order: the same store data,
    the same checksum (a file hash would change with every WAL checkpoint)."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(repr(tuple(row)).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def methodology(report: Report, suite_row: dict[str, Any], trials: list[dict[str, Any]], names: Names,
                checksum: str, prices: Any | None) -> list[tuple[str, str]]:
    """(label, value) pairs: everything a reader needs to recompute the table."""
    versions = sorted({f"{names(t['cli'])} {names.text(t.get('cli_version')) or 'unknown'}" for t in trials})
    images = sorted({str(t["image"]) for t in trials if t.get("image")})
    untiered = report.tier_sizes["none"]
    tiers = ", ".join(f"{report.tier_sizes[t]} {t}" for t in TIERS) + (f", {untiered} untiered" if untiered else "")
    budgets = "; ".join(f"{tier}: grid {', '.join(f'{b:g}' for b in report.budgets[tier].grid)}, "
                        f"tau {report.budgets[tier].tau:g}" for tier in TIERS)
    if prices is not None and prices.path is not None:
        fx = ", ".join(f"1 USD = {rate} {cur}" for cur, rate in sorted(prices.spec.fx.items())) or "none (USD prices)"
        price_text = (f"{Path(prices.path).name}, as of {prices.spec.as_of}, currency {prices.spec.currency}, "
                      f"exchange rates: {fx}, sha256 {prices.sha256}")
    else:
        price_text = "unknown (the suite folder is not on this machine): costs as stored"
    return [
        ("Suite", f"{names.suite(report.suite)} (version {suite_row.get('version') or '?'})"),
        ("Seed-prompt hash", report.seed_prompt_hash or "unknown"),
        ("Trial selection", f"{report.selection}: the {report.selection_text}"),
        ("Tasks", f"{report.n_tasks} ({tiers})"),
        ("Alpha", f"{report.alpha:g}"),
        ("Budgets (USD)", f"{budgets} (from {report.budgets_source})"),
        ("Price snapshot", price_text),
        ("CLI versions", ", ".join(versions) or "unknown"),
        ("Images", ", ".join(images) or "none recorded (local, ssh or imported trials)"),
        ("Intervals", "none" if report.intervals is None else report.intervals.to_dict()["method"]),
        ("Computed by", f"agentmeter-tui {names.text(report.tool_version)}"),
        ("Store data checksum", f"sha256 {checksum} (trials, scores and notes of the suite)"),
    ]


def _escape_chain(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")
            .replace('"', "&#34;"))


try:
    # markupsafe's own C routine (what Jinja2's autoescape runs), on a plain string with no Markup
    # object made: two to four times faster than five replaces, and the same entities by
    # construction. Its name is private, so the replaces stay as the fallback.
    from markupsafe._speedups import _escape_inner as _fast_escape
except ImportError:  # pragma: no cover - markupsafe without its C speedups
    _fast_escape = _escape_chain


def escape(text: str) -> str:
    """``text`` as HTML text or attribute value: the same characters and entities as Jinja2's
    autoescape (markupsafe), on plain strings (no Markup object per piece, in the hottest loop)."""
    return _fast_escape(text)


@dataclass
class Transcript:
    """A trial's transcript as the page shows it, with what its tools need: the first error
    event's seq (the "First error" button) and how many calls the meter counted."""

    html: str
    first_error: int | None
    calls: int


def _meter(row: Mapping[str, Any]) -> str:
    """One metered model call as the viewer shows it beside the event it belongs to."""
    tokens = sum(int(row.get(c) or 0) for c in TOKEN_CLASSES)
    cost = row.get("cost_usd")
    usd = "unpriced" if cost is None else f"${fmt_usd(cost)}"
    return f'<span class="meter" title="this call: tokens (every class) and USD">{fmt_tokens(tokens)} tok · {usd}</span>'



def transcript_html(events: Iterable[tuple], names: Names, usage: Mapping[int, Mapping[str, Any]] | None = None
                    ) -> Transcript:
    """A transcript as the page shows it, as HTML: text events plain, each tool call folded together
    with the results that follow it; each metered call's tokens and cost on the event of its seq (or
    the next one); each item anchored ``e<seq>``. Built here rather than in the template: a trial has
    hundreds of events and a site thousands of trials, and a loop of string building is several
    times faster than the template engine's per-item work. Every piece of agent text goes through
    :func:`escape`: it is untrusted."""
    out: list[str] = []
    open_tool = False
    masked = names.blind and names.mask is not None
    escape = _fast_escape  # a local name: one lookup and one call less per piece
    metered = sorted((usage or {}).items())
    pending = 0  # the next usage row not yet shown
    first_error = None
    for seq, _ts, kind, _stream, text, _data in events:
        meter = ""
        while pending < len(metered) and metered[pending][0] <= seq:
            meter += _meter(metered[pending][1])
            pending += 1
        plain = names.text(text) if masked else (text or "")
        body = escape(plain)
        if kind == TOOL_RESULT and open_tool:
            out.append(f'<pre class="result" id="e{seq}">{meter}{body}</pre>')
            continue
        if open_tool:
            out.append("</details></li>\n")
            open_tool = False
        if kind == TOOL_CALL:
            summary = escape(plain.split("\n", 1)[0][:160])  # cut before escaping: never half an entity
            out.append(f'<li class="tool" value="{seq}" id="e{seq}">{meter}<details><summary>tool: {summary}</summary>'
                       f'<pre>{body}</pre>')
            open_tool = True
        else:
            if kind == ERROR and first_error is None:
                first_error = seq
            klass = escape(kind)
            out.append(f'<li class="{klass}" value="{seq}" id="e{seq}"><span class="kind">{klass}</span>{meter}'
                       f'<pre>{body}</pre></li>\n')
    if open_tool:
        out.append("</details></li>\n")
    return Transcript("".join(out), first_error, len(metered))
