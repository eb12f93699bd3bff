"""Scores between machines: CSV export and import, and merging another store's scores.

The CSV has a header and the columns ``trial`` (the store's trial id), ``reviewer``, ``score``,
and optionally ``note``, ``time`` (ISO 8601; the score's own time is kept) and ``role``
(``adjudication`` for a final score). Import validates every row before writing any (an
error names file, line and field) and writes them in one transaction. Import and merge skip
a score identical to one already stored, so re-running either doubles nothing; two reviews
that disagree are both kept (a conflict is two reviews, never an overwrite).
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .tomlerrors import InputError, read_input

CSV_COLUMNS = ("trial", "reviewer", "score", "note", "time", "role")
REQUIRED = ("trial", "reviewer", "score")


class ScoreCsvRow(BaseModel):
    """One CSV line. Unknown columns are kept on the model (and not stored: a score has no place for them)."""

    model_config = ConfigDict(extra="allow")
    trial: int
    reviewer: str = Field(min_length=1)
    score: int = Field(ge=0, le=3)
    note: str | None = None
    time: str | None = None
    role: str | None = None

    @field_validator("note", "time", "role", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("reviewer", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @field_validator("time")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is not None:
            datetime.fromisoformat(value)  # raises ValueError: "Invalid isoformat string"
        return value

    @field_validator("role")
    @classmethod
    def _role(cls, value: str | None) -> str | None:
        if value not in (None, "review", "adjudication"):
            raise ValueError("role must be empty, 'review' or 'adjudication'")
        return None if value == "review" else value


def export_csv(store: Any, suite_id: str | None = None) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in store.score_rows(suite_id):
        writer.writerow([row.trial_id, row.reviewer, row.score, row.note or "", row.created_at, row.role or ""])
    return out.getvalue()


def read_csv(path: str | Path) -> list[tuple[int, ScoreCsvRow]]:
    """(line, row) for every data line; InputError naming file, line and field on the first bad one."""
    path = Path(path)
    text = read_input(path)
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(path, 1, missing[0], f"the header needs the columns {', '.join(REQUIRED)} "
                                              f"(found: {', '.join(header) or 'nothing'})")
    rows = []
    for record in reader:
        line = reader.line_num
        if None in record:
            raise InputError(path, line, None, "more values than header columns")
        try:
            rows.append((line, ScoreCsvRow.model_validate(record)))
        except ValidationError as exc:
            error = exc.errors()[0]
            raise InputError(path, line, ".".join(map(str, error["loc"])), error["msg"]) from None
    return rows


def import_csv(store: Any, path: str | Path, now: str) -> tuple[int, int]:
    """Import a CSV into ``store``: (added, already there). Nothing is written if any row is bad."""
    rows = read_csv(path)
    known = store.trial_ids_exist(r.trial for _, r in rows)
    for line, row in rows:
        if row.trial not in known:
            raise InputError(Path(path), line, "trial", f"no trial {row.trial} in {store.path}")
    return store.add_score_rows([{"trial_id": r.trial, "reviewer": r.reviewer, "score": r.score, "note": r.note,
                                 "created_at": r.time or now, "role": r.role} for _, r in rows])


@dataclass
class MergeResult:
    added: int = 0
    already: int = 0
    unmatched: list[dict[str, Any]] = field(default_factory=list)  # the other store's scores with no trial here


def merge_store(store: Any, other: Any) -> MergeResult:
    """Copy ``other``'s scores into ``store``, matching trials by suite, task, configuration and
    trial index (and attempt, where several attempts share an index)."""
    here: dict[tuple, list] = defaultdict(list)
    for key in store.trial_keys():
        here[key.match].append(key)
    theirs = {key.id: key for key in other.trial_keys()}
    result = MergeResult()
    rows = []
    for score in other.score_rows():
        key = theirs.get(score.trial_id)
        candidates = here.get(key.match, []) if key else []
        if not candidates:
            result.unmatched.append({"trial": score.trial_id, "reviewer": score.reviewer, "score": score.score,
                                     "key": key.match if key else None})
            continue
        same_attempt = [c for c in candidates if c.attempt == key.attempt]
        target = (same_attempt or candidates)[-1]
        rows.append({"trial_id": target.id, "reviewer": score.reviewer, "score": score.score, "note": score.note,
                     "created_at": score.created_at, "role": score.role, "blind": score.blind})
    result.added, result.already = store.add_score_rows(rows, actor="merge")
    return result
