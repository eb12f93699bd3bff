"""Report formats: one :class:`ReportFormat` per ``agentmeter report --format`` choice, found by
name in ``FORMATS``.

Adding a format is one module with a ``ReportFormat`` subclass and one line here (or one
``FORMATS.register(name, "module:Class")``); ``--format`` lists every registered name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from ..registry import LazyRegistry

if TYPE_CHECKING:
    from .report import Report


class ReportFormat(ABC):
    """Renders a whole :class:`.report.Report` as one text."""

    name: ClassVar[str]

    @abstractmethod
    def render(self, report: Report, *, detail: bool = False) -> str:
        """The report's text; ``detail``: add what the format has beyond the tables (JSON: SR,
        CBQ, CostAUBQC, EFR per tier)."""


FORMATS: LazyRegistry[ReportFormat] = LazyRegistry("report format", {
    "md": "agentmeter_tui.core.reporting.render:MarkdownFormat",
    "csv": "agentmeter_tui.core.reporting.render:CsvFormat",
    "json": "agentmeter_tui.core.reporting.render:JsonFormat",
})

