"""Charts of a report: the data of each as plain functions, and matplotlib drawings (SVG, PNG).

- AMS heatmap over the model x CLI grid, best CLI per model outlined (seed 000 Fig. 3);
- pass rate vs USD/Pass scatter, dashed quadrant lines at the means (seed 001 Fig. 4);
- pass profile by tier: Easy/Medium/Hard passes of the top configurations by AMS (seed 000 Fig. 4).

The ``*_data`` functions return plain dataclasses so a terminal UI can draw the same
charts (textual-plotext) without matplotlib. matplotlib is imported only when drawing,
through its object API (``Figure``) so no global pyplot state or GUI backend is involved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..vocab import TIERS
from .report import Report

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TIER_COLOURS = {"easy": "#59a14f", "medium": "#f28e2b", "hard": "#e15759"}  # Tableau 10: green, orange, red
CLI_MARKERS = "osD^vP*Xph"


@dataclass(frozen=True)
class HeatmapData:
    models: list[str]  # rows
    clis: list[str]  # columns
    values: list[list[float | None]]  # AMS, None where the pair was not run
    best: list[int | None]  # per model row: the column of its best CLI


def heatmap_data(report: Report) -> HeatmapData:
    models = list(dict.fromkeys(r.model for r in report.configurations))
    clis = list(dict.fromkeys(r.cli for r in report.configurations))
    ams = {r.config: r.ams for r in report.configurations}
    values = [[ams.get((m, c)) for c in clis] for m in models]
    best = []
    for row in values:
        present = [(v, j) for j, v in enumerate(row) if v is not None]
        best.append(max(present, key=lambda vj: (vj[0], -vj[1]))[1] if present else None)
    return HeatmapData(models, clis, values, best)


@dataclass(frozen=True)
class ScatterPoint:
    model: str
    cli: str
    pass_rate: float  # passes / tasks
    usd_per_pass: float
    ams: float | None


@dataclass(frozen=True)
class NoPassPoint:
    """A configuration without a pass: no USD/Pass, drawn at pass rate 0 and the USD it spent (marked)."""

    model: str
    cli: str
    usd_spent: float


@dataclass(frozen=True)
class ScatterData:
    points: list[ScatterPoint]
    mean_pass_rate: float | None  # quadrant lines: the means over the points with a pass
    mean_usd_per_pass: float | None
    left_out: list[str]  # configurations without a known cost (unpriced runs) or without tasks
    no_pass: list[NoPassPoint] = field(default_factory=list)
    front: list[int] = field(default_factory=list)  # indices into points: the Pareto front, cheapest first


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the (pass rate, cost) points no other point beats on both axes (higher pass rate,
    lower cost), cheapest first."""
    front = []
    for i, (rate, usd) in enumerate(points):
        dominated = any((r >= rate and u <= usd) and (r > rate or u < usd) for k, (r, u) in enumerate(points) if k != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda k: points[k][1])


def scatter_data(report: Report) -> ScatterData:
    points, left_out, no_pass = [], [], []
    for r in report.configurations:
        if r.n_tasks and r.usd_per_pass is not None:
            points.append(ScatterPoint(r.model, r.cli, r.passes / r.n_tasks, r.usd_per_pass, r.ams))
        elif r.n_tasks and r.usd_total is not None:
            no_pass.append(NoPassPoint(r.model, r.cli, r.usd_total))
        else:
            left_out.append(f"{r.model}/{r.cli}")
    front = pareto_front([(p.pass_rate, p.usd_per_pass) for p in points])
    if not points:
        return ScatterData([], None, None, left_out, no_pass, front)
    return ScatterData(points, sum(p.pass_rate for p in points) / len(points),
                       sum(p.usd_per_pass for p in points) / len(points), left_out, no_pass, front)


@dataclass(frozen=True)
class TierProfileData:
    labels: list[str]  # "model/cli", best AMS first
    passes: dict[str, list[int]]  # tier -> passes per label
    ams: list[float | None]
    tasks_per_tier: dict[str, int]


def tier_profile_data(report: Report, top: int = 12) -> TierProfileData:
    ranked = sorted(report.configurations,
                    key=lambda r: (r.ams is None, -(r.ams or 0.0), -r.passes, r.model, r.cli))[:top]
    return TierProfileData([f"{r.model}/{r.cli}" for r in ranked],
                           {t: [r.passes_by_tier[t] for r in ranked] for t in TIERS},
                           [r.ams for r in ranked], {t: report.tier_sizes[t] for t in TIERS})


# -- drawing ----------------------------------------------------------------------------------

def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    fig.patch.set_facecolor("white")
    return fig


def draw_heatmap(data: HeatmapData, title: str, version: str = "") -> Figure:
    import numpy as np
    from matplotlib.patches import Rectangle

    fig = _figure(max(6.0, 1.9 + 1.35 * len(data.clis)), 1.6 + 0.55 * max(1, len(data.models)))
    ax = fig.add_subplot()
    grid = np.array([[np.nan if v is None else v for v in row] for row in data.values], dtype=float)
    present = grid[~np.isnan(grid)]
    top = max(0.1, float(present.max())) if present.size else 1.0
    cmap = _cmap("YlGnBu")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=top, aspect="auto")
    ax.set_xticks(range(len(data.clis)), labels=data.clis)
    ax.set_yticks(range(len(data.models)), labels=data.models)
    ax.tick_params(length=0)
    ax.xaxis.tick_top()
    for spine in ax.spines.values():
        spine.set_visible(False)
    for i, row in enumerate(data.values):
        for j, value in enumerate(row):
            if value is None:
                ax.text(j, i, "—", ha="center", va="center", color="#888888")
                continue
            dark = value / top > 0.55
            ax.text(j, i, f"{value:.3f}", ha="center", va="center", fontsize=9,
                    color="white" if dark else "#1a1a1a")
        best = data.best[i]
        if best is not None:
            ax.add_patch(Rectangle((best - 0.5 + 0.04, i - 0.5 + 0.04), 0.92, 0.92, fill=False,
                                   edgecolor="#d62728", linewidth=2.2))
    fig.colorbar(image, ax=ax, label="AMS", shrink=0.85, pad=0.02)
    ax.set_title(title, loc="left", fontsize=11, pad=10)
    _stamp(fig, version)
    return fig


def _cmap(name: str):
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad="#eeeeee")


def draw_scatter(data: ScatterData, title: str, version: str = "") -> Figure:
    """Both axes from 0 (a pass rate from 95 % to 100 % exaggerates every gap); each point labelled; the
    Pareto front joined; configurations without a pass at 0 % and the USD they spent, hollow."""
    import matplotlib

    fig = _figure(8.6, 5.4)
    ax = fig.add_subplot()
    models = list(dict.fromkeys([p.model for p in data.points] + [p.model for p in data.no_pass]))
    clis = list(dict.fromkeys([p.cli for p in data.points] + [p.cli for p in data.no_pass]))
    palette = matplotlib.colormaps["tab10"]
    colour = {m: palette(i % 10) for i, m in enumerate(models)}
    marker = {c: CLI_MARKERS[i % len(CLI_MARKERS)] for i, c in enumerate(clis)}
    costs = [p.usd_per_pass for p in data.points] + [p.usd_spent for p in data.no_pass]
    right = (max(costs) * 1.15 if costs else 0) or 1.0
    labels = _LabelPlacer(right)
    for p in data.points:
        ax.scatter(p.usd_per_pass, 100 * p.pass_rate, s=70, color=colour[p.model], marker=marker[p.cli],
                   edgecolors="white", linewidths=0.8, zorder=3)
        labels.place(ax, p.usd_per_pass, 100 * p.pass_rate, f"{p.model}/{p.cli}", "#333333")
    for miss in data.no_pass:
        ax.scatter(miss.usd_spent, 0, s=70, facecolors="none", edgecolors=colour[miss.model], marker=marker[miss.cli],
                   linewidths=1.4, zorder=3, clip_on=False)
        labels.place(ax, miss.usd_spent, 0, f"{miss.model}/{miss.cli} (no pass: ${miss.usd_spent:.3g} spent)",
                     "#9b2c2c")
    if len(data.front) > 1:
        front = [data.points[k] for k in data.front]
        ax.plot([p.usd_per_pass for p in front], [100 * p.pass_rate for p in front], color="#102a43",
                linewidth=1.2, zorder=2, label="Pareto front")
    if data.mean_pass_rate is not None and data.mean_usd_per_pass is not None:  # both or neither: any point
        ax.axhline(100 * data.mean_pass_rate, color="#777777", linestyle="--", linewidth=1, zorder=1)
        ax.axvline(data.mean_usd_per_pass, color="#777777", linestyle="--", linewidth=1, zorder=1)
        ax.text(0.01, 0.99, "higher pass, lower cost", transform=ax.transAxes, ha="left", va="top",
                fontsize=8, color="#2f6f3e")
    ax.set_xlim(0, right)
    ax.set_ylim(0, 105)
    from matplotlib.ticker import PercentFormatter

    ax.yaxis.set_major_formatter(PercentFormatter(decimals=0))
    ax.set_xlabel("USD per pass (lower is better); hollow: no pass, at the USD spent")
    ax.set_ylabel("Pass rate (share of tasks passed)")
    ax.grid(True, color="#e5e5e5", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    from matplotlib.lines import Line2D

    model_handles = [Line2D([], [], linestyle="", marker="o", color=colour[m], markersize=8, label=m) for m in models]
    cli_handles = [Line2D([], [], linestyle="", marker=marker[c], color="#555555", markersize=8, label=c)
                   for c in clis]
    first = ax.legend(handles=model_handles, title="Model", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      frameon=False, fontsize=8, title_fontsize=9)
    ax.add_artist(first)
    ax.legend(handles=cli_handles, title="CLI", loc="lower left", bbox_to_anchor=(1.01, 0.0), frameon=False,
              fontsize=8, title_fontsize=9)
    subtitle = "line: Pareto front; dashed: mean pass rate and mean USD/pass"
    if data.left_out:
        subtitle += f"; {len(data.left_out)} unpriced configuration(s) not shown"
    ax.set_title(f"{title}\n{subtitle}", loc="left", fontsize=11)
    _stamp(fig, version)
    return fig


class _LabelPlacer:
    """Each point's name beside it; a name that would overlap one already placed moves a line down
    (positions in axes fractions: the plot is 0..right USD by 0..105 %)."""

    LINE, CHAR = 0.035, 0.0085  # one 7-point text line and one character, as shares of the axes

    def __init__(self, right: float):
        self.right = right
        self.placed: list[tuple[float, float, float]] = []  # (y, x from, x to)

    def place(self, ax, x: float, y: float, text: str, colour: str) -> None:
        fx, fy = x / self.right + 0.012, y / 105 + 0.01
        width = self.CHAR * len(text)
        left = fx + width > 1.0  # it would run into the legend: put it on the point's left
        start, end = (fx - 0.024 - width, fx - 0.024) if left else (fx, fx + width)
        while any(abs(fy - py) < self.LINE and start < pe and ps < end for py, ps, pe in self.placed):
            fy -= self.LINE
        self.placed.append((fy, start, end))
        ax.annotate(text, (x, y), xytext=(end if left else start, fy), textcoords="axes fraction", fontsize=7,
                    color=colour, zorder=4, annotation_clip=False, ha="right" if left else "left")


def _stamp(fig: Figure, version: str) -> None:
    """Which agentmeter-tui drew it, in the corner of every chart."""
    if version:
        fig.text(0.995, 0.005, f"agentmeter-tui {version}", ha="right", va="bottom", fontsize=6, color="#888888")


def draw_tier_profile(data: TierProfileData, title: str, version: str = "") -> Figure:
    fig = _figure(8.6, 1.4 + 0.42 * max(1, len(data.labels)))
    ax = fig.add_subplot()
    y = list(range(len(data.labels)))
    left = [0] * len(data.labels)
    for tier in TIERS:
        counts = data.passes[tier]
        bars = ax.barh(y, counts, left=left, color=TIER_COLOURS[tier], height=0.66,
                       label=f"{tier.capitalize()} ({_count(data.tasks_per_tier[tier], 'task')})",
                       edgecolor="white")
        for bar, count in zip(bars, counts):
            if count and bar.get_width() >= 0.045 * max(1, _longest(data)):
                ax.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2, str(count),
                        ha="center", va="center", fontsize=8, color="white", fontweight="bold")
        left = [a + b for a, b in zip(left, counts)]
    longest = _longest(data)
    for i, (total, ams) in enumerate(zip(left, data.ams)):
        shown = _count(total, "pass", "passes") + (f" · AMS {ams:.3f}" if ams is not None else "")
        ax.text(total + 0.01 * max(1, longest), i, shown, va="center", fontsize=8, color="#333333")
    ax.set_yticks(y, labels=data.labels)
    ax.invert_yaxis()
    from matplotlib.ticker import MaxNLocator

    ax.set_xlim(0, max(1, longest) * 1.32)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("Passes")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(True, axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="lower right", frameon=False, fontsize=8, ncols=3, bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title, loc="left", fontsize=11, pad=22)
    _stamp(fig, version)
    return fig


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _longest(data: TierProfileData) -> int:
    return max((sum(data.passes[t][i] for t in TIERS) for i in range(len(data.labels))), default=0)


CHARTS = ("ams-heatmap", "pass-vs-cost", "tier-profile")


def write_charts(report: Report, folder: Path, formats: tuple[str, ...] = ("svg", "png"), top: int = 12) -> list[Path]:
    """Draw the three charts into ``folder`` as ``<name>.<format>``; return the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    figures = {
        "ams-heatmap": draw_heatmap(heatmap_data(report), f"AMS by model and CLI: {report.suite}\n"
                                    "outlined: each model's best CLI", report.tool_version),
        "pass-vs-cost": draw_scatter(scatter_data(report), f"Pass rate vs USD per pass: {report.suite}",
                                     report.tool_version),
        "tier-profile": draw_tier_profile(tier_profile_data(report, top),
                                          f"Pass profile by tier: top {min(top, len(report.configurations))} "
                                          f"configurations by AMS ({report.suite})", report.tool_version),
    }
    import matplotlib

    written = []
    # A fixed hash salt and no creation date: the same report draws byte-identical SVG files.
    with matplotlib.rc_context({"svg.hashsalt": "agentmeter"}):
        for name, fig in figures.items():
            for fmt in formats:
                path = folder / f"{name}.{fmt}"
                fig.savefig(path, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
                written.append(path)
    return written

