"""Provides the report's charts drawn in the terminal, from ``core.reporting.charts`` data.

- :class:`AmsHeatmap`: AMS over the model x CLI grid, each cell shaded between the theme's
  ``heat-low`` and ``heat-high``, each model's best CLI marked;
- :class:`PassCostPlot`: pass rate against USD per pass (textual-plotext), one series per
  model, with the means as quadrant lines;
- :class:`TierProfile`: passes by tier (easy/medium/hard) of the top configurations.
The data functions are the same ones the matplotlib charts of ``agentmeter report`` use.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from rich.table import Table
from rich.text import Text
from textual.color import Color
from textual.markup import escape
from textual.widgets import Static
from textual_plotext import PlotextPlot

from ...core.reporting.charts import HeatmapData, ScatterData, TierProfileData
from ...core.vocab import TIERS
from ..themes import APP_VARIABLES, heat_colour

SERIES_VARS = ("meter-uncached", "status-passed", "meter-output", "status-killed", "meter-cached", "status-errored",
               "meter-reasoning", "meter-write")
TIER_VARS = {"easy": "status-passed", "medium": "status-failed", "hard": "status-errored"}


def theme_rgb(variables: dict[str, str], name: str) -> tuple[int, int, int]:
    return Color.parse(variables.get(name) or APP_VARIABLES[name]).rgb


D = TypeVar("D")


class ThemedChart(Static, Generic[D]):
    """A chart drawn from its data (a ``D``) with theme colours: drawn again when the theme changes."""

    _data: D | None = None

    def show(self, data: D) -> None:
        self._data = data
        self._draw(data)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self._data is not None:
            self._draw(self._data)

    def _draw(self, data: D) -> None:
        raise NotImplementedError


class AmsHeatmap(ThemedChart[HeatmapData]):
    def _draw(self, data: HeatmapData) -> None:
        variables = self.app.theme_variables
        narrow = len(data.clis) > 4  # many CLIs: two decimals and short headers so every column fits
        table = Table(box=None, padding=(0, 1), show_edge=False, expand=False)
        table.add_column("AMS", style="bold", no_wrap=True, max_width=10)
        for cli in data.clis:
            table.add_column(cli[:5] if narrow else cli[:12], justify="center", no_wrap=True)
        top = max((v for row in data.values for v in row if v is not None), default=1.0) or 1.0
        for model, row, best in zip(data.models, data.values, data.best):
            cells = []
            for j, value in enumerate(row):
                if value is None:
                    cells.append(Text(" — ", style="dim"))
                    continue
                colour = heat_colour(variables, value / top)
                ink = "#101010" if colour.brightness > 0.55 else "#f4f4f4"
                shown = f"{value:.2f}" if narrow else f"{value:.3f}"
                # The best CLI of the model: underlined and starred (colour alone is not enough).
                style = f"{ink} on {colour.hex}" + (" bold underline" if j == best else "")
                cells.append(Text(f"{'★' if j == best else ' '}{shown} ", style=style))
            table.add_row(model[:10], *cells)
        self.update(table)


class PassCostPlot(PlotextPlot):
    """Points labelled in place (a legend would cover the corner where the best ones sit)."""

    def show(self, data: ScatterData) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        variables = self.app.theme_variables
        models = list(dict.fromkeys(p.model for p in data.points))
        colours = {m: theme_rgb(variables, SERIES_VARS[n % len(SERIES_VARS)]) for n, m in enumerate(models)}
        muted = theme_rgb(variables, "status-queued")
        costs = [p.usd_per_pass for p in data.points] or [1.0]
        if data.mean_pass_rate is not None and data.mean_usd_per_pass is not None:  # both, or neither
            plt.hline(100 * data.mean_pass_rate, color=muted)
            plt.vline(data.mean_usd_per_pass, color=muted)
        canvas = theme_rgb(variables, "surface") if "surface" in variables else None
        right = max(costs) * 1.6 or 1.0
        for point in data.points:
            plt.scatter([point.usd_per_pass], [100 * point.pass_rate], marker="●", color=colours[point.model])
        # One label per spot: configurations that land on the same cell share it ("ace ×7").
        spots: dict[tuple[int, int], list] = {}
        for point in data.points:
            key = (round(point.usd_per_pass / right * 40), round(point.pass_rate * 20))
            spots.setdefault(key, []).append(point)
        rows: list[tuple[float, float, float]] = []  # labels placed so far: (y, x from, x to)
        step = 115 / max(4, (self.size.height or 20) - 6)  # one text row in data units
        for points in spots.values():
            first = points[0]
            same_model = all(p.model == first.model for p in points)
            label = (f"{first.model}/{first.cli}" if len(points) == 1 else
                     f"{first.model} ×{len(points)}" if same_model else f"{len(points)} configs")[:22]
            x, y = first.usd_per_pass, 100 * first.pass_rate
            start, end = x + right * 0.03, x + right * (0.03 + len(label) / max(20, (self.size.width or 60) - 12))
            ly = y
            while any(abs(ly - r[0]) < step and start < r[2] and r[1] < end for r in rows):
                ly -= step  # a label already sits there: go one row down
            rows.append((ly, start, end))
            plt.text(label, start, ly, color=colours[first.model] if same_model else muted, background=canvas,
                     alignment="left")
        plt.xlim(0, right)
        plt.ylim(-5, 110)
        plt.yticks([0, 25, 50, 75, 100])
        plt.title("Pass % vs USD per pass")
        plt.xlabel("USD / pass · dashed: means" + (f" · {len(data.no_pass)} without a pass" if data.no_pass else "")
                   + (f" · {len(data.left_out)} unpriced" if data.left_out else ""))
        self.refresh()


class TierProfile(ThemedChart[TierProfileData]):
    """Passes by tier of the top configurations, as stacked bars of theme colours."""

    def _draw(self, data: TierProfileData) -> None:
        if not data.labels:
            self.update("no configurations yet")
            return
        width = max(10, (self.size.width or 60) - 44)
        most = max(1, max(sum(data.passes[t][i] for t in TIERS) for i in range(len(data.labels))))
        lines = ["  ".join(f"[${TIER_VARS[t]}]■[/] {t} ({data.tasks_per_tier[t]})" for t in TIERS)]
        for i, label in enumerate(data.labels):
            bar = "".join(f"[${TIER_VARS[t]}]{'█' * round(width * data.passes[t][i] / most)}[/]" for t in TIERS)
            total = sum(data.passes[t][i] for t in TIERS)
            ams = data.ams[i]
            lines.append(f"{escape(f'{label[:22]:<22}')} {bar} [b]{total}[/]" + (f" [$text-muted]AMS {ams:.3f}[/]" if ams is not None
                                                                     else ""))
        self.update("\n".join(lines))
