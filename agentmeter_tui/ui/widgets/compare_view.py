"""Provides :class:`CompareView`: two trials' steps in two columns, one row per step position.

A virtual list like the transcript view: only rows on screen are rendered, so two 50,000-event
trials scroll as fast as short ones. Each side shows the step number, the call, its tokens and
the running total; the first row where the two differ is marked, a repeated call and a file
read again are highlighted with how many times so far.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...core.review.compare import Comparison, Step
from ...core.inert import inert
from .. import format as fmt

NUMBER = 6  # "  123 "
FIGURES = 16  # " 12.3k  1.23M"
MIDDLE = 3  # " │ "


class CompareView(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False, id="cmp-up"),
        Binding("down", "cursor(1)", "Down", show=False, id="cmp-down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="cmp-page-up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="cmp-page-down"),
        Binding("home", "edge(0)", "First step", show=False, id="cmp-home"),
        Binding("end", "edge(1)", "Last step", show=False, id="cmp-end"),
    ]
    COMPONENT_CLASSES = {"cv--number", "cv--call", "cv--message", "cv--error", "cv--failed", "cv--repeat",
                         "cv--reread", "cv--figures", "cv--divergence", "cv--cursor", "cv--rule", "cv--empty"}

    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.comparison: Comparison | None = None

    def load(self, comparison: Comparison) -> None:
        self.comparison = comparison
        self.virtual_size = Size(self.scrollable_content_region.width, comparison.rows)
        self.cursor = 0
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def grown(self) -> None:
        """More steps were read (a long trial is read in ranges): the same rows, more of them."""
        if self.comparison is not None:
            self.virtual_size = Size(self.scrollable_content_region.width, self.comparison.rows)
            self.refresh()

    def watch_cursor(self, cursor: int) -> None:
        self.refresh()

    def show_row(self, row: int) -> None:
        if self.comparison is None or not self.comparison.rows:
            return
        self.cursor = max(0, min(self.comparison.rows - 1, row))
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + self.size.height:
            self.scroll_to(y=self.cursor - self.size.height + 1, animate=False, immediate=True)

    def action_cursor(self, step: int) -> None:
        self.show_row(self.cursor + step)

    def action_page(self, direction: int) -> None:
        self.scroll_to(y=self.scroll_offset.y + direction * max(1, self.size.height - 1), animate=False,
                       immediate=True)
        self.show_row(self.cursor + direction * max(1, self.size.height - 1))

    def action_edge(self, end: int) -> None:
        if self.comparison is not None:
            self.show_row(self.comparison.rows - 1 if end else 0)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.refresh()

    def _style(self, component: str, row_bg: Style) -> Style:
        """A component's style with the row's background (cursor, divergence) laid over its own."""
        return self.get_component_rich_style(component) + row_bg

    def _side(self, step: Step | None, number: int, width: int, base: Style) -> list[Segment]:
        if step is None:
            return [Segment(" " * width, self._style("cv--empty", base))]
        label_style = self.get_component_rich_style(
            "cv--error" if step.kind == "error" else "cv--message" if step.kind == "message" else
            "cv--failed" if step.failed else "cv--call")
        marks = []
        if step.repeat > 1:
            marks.append((f" ×{step.repeat}", "cv--repeat"))
        if step.read_path and step.read_repeat > 1:
            marks.append((f" read ×{step.read_repeat}", "cv--reread"))
        mark_text = "".join(text for text, _ in marks)
        room = max(1, width - NUMBER - FIGURES - len(mark_text))
        label = inert(step.label)  # a tool call's command, as the agent wrote it
        label = label if len(label) <= room else label[:room - 1] + "…"
        figures = f"{fmt.tokens(step.tokens) if step.tokens else '':>7} {fmt.tokens(step.total):>7} "
        segments = [Segment(f"{number + 1:>5} ", self._style("cv--number", base)),
                    Segment(label.ljust(room), label_style + base)]
        # The repeat marks keep their own background: they must stand out on any row.
        segments += [Segment(text, self.get_component_rich_style(cls)) for text, cls in marks]
        segments.append(Segment(figures.rjust(FIGURES), self._style("cv--figures", base)))
        return segments

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        comparison = self.comparison
        row = int(self.scroll_offset.y) + y
        if comparison is None or row >= comparison.rows:
            return Strip.blank(width, self.rich_style)
        base = Style()  # the row's background: none, the cursor's, or the divergence's
        if comparison.divergence == row:
            base = Style(bgcolor=self.get_component_rich_style("cv--divergence").bgcolor)
        if row == self.cursor:
            base = Style(bgcolor=self.get_component_rich_style("cv--cursor").bgcolor)
        half = max(10, (width - MIDDLE) // 2)
        left = comparison.left.steps[row] if row < len(comparison.left.steps) else None
        right = comparison.right.steps[row] if row < len(comparison.right.steps) else None
        rule = "▶" if comparison.divergence == row else "│"
        segments = self._side(left, row, half, base)
        segments.append(Segment(f" {rule} ", self._style("cv--rule", base)))
        segments += self._side(right, row, width - half - MIDDLE, base)
        return Strip(segments).crop_extend(0, width, self.rich_style + base)
