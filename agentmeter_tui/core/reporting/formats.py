"""Report formats: one :class:`ReportFormat` per ``agentmeter report --format`` choice, found by
name in ``FORMATS``.

Adding a format is one module with a ``ReportFormat`` subclass (text) or a ``FolderFormat``
subclass (a folder, like the static site) and one line here (or one
``FORMATS.register(name, "module:Class")``); ``--format`` lists every registered name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

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


class FolderFormat(ABC):
    """Writes a whole report as a folder of files (a site) read from the store as well: pages per
    configuration and per trial need more than the report's tables. The command builds the
    report with every section the format shows, and ``--out`` names the folder."""

    name: ClassVar[str]
    #: a failed honesty gate is shown in the folder (its verdict), not a reason to write nothing
    shows_gate = True
    #: the report comes with its bootstrap deferred and the format calls ``report.settle()`` (the
    #: site does, once its workers have started); otherwise the intervals are computed before
    defers_intervals = False

    @abstractmethod
    def write(self, store: Any, report: Report, out: Path, *, blind: bool = False,
              comparison: Any | None = None) -> str:
        """Write the folder; a one-line summary of what was written. ``comparison``: a
        ``compare.RunComparison`` with this store's run as B (``report --compare A B``)."""


FORMATS: LazyRegistry[ReportFormat | FolderFormat] = LazyRegistry("report format", "agentmeter.report_formats")

