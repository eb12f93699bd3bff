"""The site's charts as inline SVG written by hand: the AMS heatmap over the grid, and pass rate
against USD per pass with the Pareto front marked.

Hand-written rather than drawn by matplotlib: a few hundred bytes per cell instead of a figure's
tens of kilobytes, text that the page's own font and theme colours render, labels a browser can
search, and the same bytes for the same report (no renderer version in the output).
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from ..charts import HeatmapData, ScatterData

CELL_W, CELL_H, LABEL_W, HEAD_H = 96, 30, 170, 34


def _colour(value: float | None, low: float, high: float) -> str:
    """A light-to-saturated teal ramp; grey for no value."""
    if value is None:
        return "#e3e6ea"
    share = 0.0 if high <= low else (value - low) / (high - low)
    lightness = 92 - 52 * share
    return f"hsl(178, 55%, {lightness:.0f}%)"


def heatmap(data: HeatmapData, name: Callable[[str], str] = str) -> str:
    values = [v for row in data.values for v in row if v is not None]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    width = LABEL_W + CELL_W * max(1, len(data.clis)) + 8
    height = HEAD_H + CELL_H * max(1, len(data.models)) + 8
    out = [f'<svg class="chart heatmap" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="AMS by model and CLI">']
    for j, cli in enumerate(data.clis):
        x = LABEL_W + CELL_W * j + CELL_W / 2
        out.append(f'<text x="{x:.0f}" y="{HEAD_H - 10}" text-anchor="middle" class="axis">{escape(name(cli))}</text>')
    for i, model in enumerate(data.models):
        y = HEAD_H + CELL_H * i
        out.append(f'<text x="{LABEL_W - 8}" y="{y + CELL_H / 2 + 4:.0f}" text-anchor="end" class="axis">'
                   f'{escape(name(model))}</text>')
        for j, value in enumerate(data.values[i]):
            x = LABEL_W + CELL_W * j
            best = data.best[i] == j
            stroke = ' stroke="#102a43" stroke-width="2.5"' if best else ' stroke="#ffffff" stroke-width="1"'
            out.append(f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" fill="{_colour(value, low, high)}"'
                       f'{stroke}><title>{escape(name(model))} × {escape(name(data.clis[j]))}: '
                       f'{"no AMS" if value is None else f"AMS {value:.3f}"}</title></rect>')
            label = "—" if value is None else f"{value:.3f}"
            out.append(f'<text x="{x + CELL_W / 2:.0f}" y="{y + CELL_H / 2 + 4:.0f}" text-anchor="middle" '
                       f'class="cell">{label}</text>')
    out.append("</svg>")
    return "".join(out)


def scatter(data: ScatterData, name: Callable[[str], str] = str, width: int = 640, height: int = 360) -> str:
    """Both axes from 0, every point labelled, the Pareto front joined; a configuration without a pass
    sits at 0 % and the USD it spent, hollow and marked."""
    pad_l, pad_r, pad_t, pad_b = 58, 16, 14, 42
    out = [f'<svg class="chart scatter" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="Pass rate against USD per pass">']
    if not data.points and not data.no_pass:
        out.append(f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" class="axis">'
                   "no priced configuration</text></svg>")
        return "".join(out)
    coords = [(p.pass_rate, p.usd_per_pass) for p in data.points]
    top = max([u for _, u in coords] + [p.usd_spent for p in data.no_pass]) * 1.08 or 1.0
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b

    def xy(rate: float, usd: float) -> tuple[float, float]:
        return pad_l + plot_w * usd / top, pad_t + plot_h * (1 - rate)

    out.append(f'<rect x="{pad_l}" y="{pad_t}" width="{plot_w}" height="{plot_h}" class="frame"/>')
    for k in range(5):
        rate = k / 4
        _, y = xy(rate, 0)
        out.append(f'<text x="{pad_l - 6}" y="{y + 4:.0f}" text-anchor="end" class="axis">{rate * 100:.0f}%</text>')
        usd = top * k / 4
        x, _ = xy(0, usd)
        out.append(f'<text x="{x:.0f}" y="{height - pad_b + 16}" text-anchor="middle" class="axis">${usd:.3g}</text>')
    out.append(f'<text x="{pad_l + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle" class="axis">'
               "USD per pass (lower is better); hollow: no pass, at the USD spent</text>")
    if len(data.front) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(*coords[k]) for k in data.front))
        out.append(f'<polyline points="{path}" class="front"/>')
    on_front = set(data.front)
    placed: list[tuple[float, float, float]] = []  # labels drawn so far: (baseline y, x from, x to)
    for k, point in enumerate(data.points):
        x, y = xy(point.pass_rate, point.usd_per_pass)
        label = f"{name(point.model)} / {name(point.cli)}"
        klass = "dot front-dot" if k in on_front else "dot"
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" class="{klass}"><title>{escape(label)}: '
                   f'{point.pass_rate * 100:.0f}% pass, ${point.usd_per_pass:.4g}/pass'
                   f'{" (Pareto front)" if k in on_front else ""}</title></circle>')
        out.append(_label(x, y, label, width, placed))
    for miss in data.no_pass:
        x, y = xy(0.0, miss.usd_spent)
        label = f"{name(miss.model)} / {name(miss.cli)}"
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" class="dot nopass"><title>{escape(label)}: no pass, '
                   f'${miss.usd_spent:.4g} spent</title></circle>')
        out.append(_label(x, y, f"{label} (no pass)", width, placed))
    out.append("</svg>")
    return "".join(out)


def _label(x: float, y: float, text: str, width: int, placed: list[tuple[float, float, float]]) -> str:
    """A point's name beside it, on its left when it would run off the right edge, a line lower while
    it would overlap a name already drawn."""
    span = 6.2 * len(text)
    right = x + 8 + span > width
    start, end = (x - 8 - span, x - 8) if right else (x + 8, x + 8 + span)
    baseline = y - 6
    while any(abs(baseline - b) < 12 and start < e and s < end for b, s, e in placed):
        baseline += 12
    placed.append((baseline, start, end))
    anchor, at = ("end", end) if right else ("start", start)
    return f'<text x="{at:.1f}" y="{baseline:.1f}" text-anchor="{anchor}" class="point-label">{escape(text)}</text>'
