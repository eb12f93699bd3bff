"""Reports: a :class:`Report` built from a store or from trial records, rendered in a registered
format (md, csv, json: :mod:`.formats`).

``report_from_store(store, suite_id, selection=..., rubric=..., subset=...)`` is what
``agentmeter report`` and the TUI's report screen call; ``report_from_records`` and
``build_report`` serve exported records and tests. Charts are in ``core.reporting.charts``.
"""

from .build import (
                    TaskList,
                    build_report,
                    read_task_list,
                    report_from_records,
                    report_from_store,
                    resolve_budgets,
                    attempt_from_record,
                    attempts_from_store,
                    suite_settings,
)
from .formats import FORMATS, ReportFormat
from .render import render, render_csv, render_json, render_markdown
from .report import Report, RubricTable, config_name

__all__ = [
    "FORMATS", "Report", "ReportFormat", "RubricTable", "TaskList", "build_report", "config_name",
    "read_task_list", "render", "render_csv", "render_json", "render_markdown", "report_from_records",
    "report_from_store", "resolve_budgets", "attempt_from_record", "attempts_from_store", "suite_settings",
]
