"""The differential funnel per configuration, from trial records (seed 001, Table 3 shape).

For each (model, CLI): the mean over its trials of Build, Exec, SideFx, Exact, Fuzzy and
Semantic, plus the mean runtime ratio. A trial that was killed or errored before its tool
could be judged counts 0 everywhere (it built nothing that could be tested); infra-invalid
trials are our failures and are left out. Of a retried trial, only the last attempt counts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from .funnel import FUNNEL, METRIC_LABELS

COLUMNS = ("build", *FUNNEL)
_UNJUDGED = ("killed", "errored")


@dataclass
class FunnelRow:
    model: str
    cli: str
    task: str | None = None  # None: every task of the configuration
    trials: int = 0
    unjudged: int = 0  # killed or errored before the verifier: 0 on every metric that was measured
    values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    ratios: list[float] = field(default_factory=list)

    def mean(self, metric: str) -> float | None:
        values = self.values.get(metric, [])
        if not values and (metric == "semantic" or not self.unjudged):
            return None  # never measured (Semantic is off unless a judge is set)
        return sum(values) / (len(values) + self.unjudged)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "cli": self.cli, "task": self.task, "trials": self.trials,
                **{m: self.mean(m) for m in COLUMNS},
                "runtime_ratio": fmean(self.ratios) if self.ratios else None}


def _countable(records: Iterable[Any]) -> list[Any]:
    latest: dict[tuple, Any] = {}
    for record in records:
        key = (record.task, record.model, record.cli, record.trial)
        attempt = int(record.extra.get("attempt") or 0)
        if key not in latest or attempt >= int(latest[key].extra.get("attempt") or 0):
            latest[key] = record
    return [r for r in latest.values() if r.status != "infra-invalid"]


def funnel_rows(records: Iterable[Any], by_task: bool = False) -> list[FunnelRow]:
    """One row per configuration (and task, with ``by_task``) that has differential trials."""
    rows: dict[tuple, FunnelRow] = {}
    for record in _countable(records):
        details = record.extra.get("verifier") or {}
        judged = details.get("kind") == "differential"
        if not judged and record.status not in _UNJUDGED:
            continue  # another verifier kind
        key = (record.model, record.cli, record.task if by_task else None)
        row = rows.setdefault(key, FunnelRow(*key))
        row.trials += 1
        if not judged:
            row.unjudged += 1
            continue
        for metric in COLUMNS:
            value = details.get("scores", {}).get(metric)
            if value is not None:
                row.values[metric].append(float(value))
        ratio = (details.get("runtime") or {}).get("ratio")
        if ratio is not None:
            row.ratios.append(ratio)
    return sorted(rows.values(), key=lambda r: (r.model, r.cli, r.task or ""))


def funnel_markdown(rows: list[FunnelRow]) -> str:
    with_task = any(r.task for r in rows)
    head = ["model", "cli", *(["task"] if with_task else []), "trials",
            *(METRIC_LABELS[m] for m in COLUMNS), "runtime x"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row.model, row.cli, *([row.task or ""] if with_task else []), str(row.trials)]
        cells += ["-" if (v := row.mean(m)) is None else f"{v * 100:.1f}" for m in COLUMNS]
        cells.append(f"{fmean(row.ratios):.2f}" if row.ratios else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
