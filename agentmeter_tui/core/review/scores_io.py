"""Scores between machines: CSV export and import, and merging another store's scores.

The CSV has a header and the columns ``trial`` (the store's trial id), ``reviewer``, ``score``,
and optionally ``note``, ``time`` (ISO 8601; the score's own time is kept) and ``role``
(``adjudication`` for a final score, ``note`` for a reviewer's note written with ``n`` in
review: its score is empty, its text is ``note``). Import validates every row before writing any (an
error names file, line and field) and writes them in one transaction. Import and merge skip
a score (or note) identical to one already stored, so re-running either doubles nothing; two
reviews that disagree are both kept (a conflict is two reviews, never an overwrite).
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..tomlerrors import InputError, read_input

CSV_COLUMNS = ("trial", "reviewer", "score", "note", "time", "role")
REQUIRED = ("trial", "reviewer", "score")
NOTE = "note"  # the role of a row that carries a review note (the notes table), not a score


class ScoreCsvRow(BaseModel):
    """One CSV line. Unknown columns are kept on the model (and not stored: a score has no place for them)."""

    model_config = ConfigDict(extra="allow")
    trial: int
    reviewer: str = Field(min_length=1)
    score: int | None = Field(default=None, ge=0, le=3)
    note: str | None = None
    time: str | None = None
    role: str | None = None

    @field_validator("score", "note", "time", "role", mode="before")
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
        if value not in (None, "review", "adjudication", NOTE):
            raise ValueError("role must be empty, 'review', 'adjudication' or 'note'")
        return None if value == "review" else value

    @model_validator(mode="after")
    def _score_or_note(self) -> ScoreCsvRow:
        if self.role == NOTE and (self.score is not None or not self.note):
            raise ValueError("a 'note' row has an empty score and a note")
        if self.role != NOTE and self.score is None:
            raise ValueError("score: a score 0-3 is required (empty only on a 'note' row)")
        return self


def export_csv(store: Any, suite_id: str | None = None) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in store.reviews.score_rows(suite_id):
        writer.writerow([row.trial_id, row.reviewer, row.score, row.note or "", row.created_at, row.role or ""])
    for note in store.reviews.note_rows(suite_id):
        writer.writerow([note["trial_id"], note["author"], "", note["text"], note["created_at"], NOTE])
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
    """Import a CSV into ``store``: scores (added, already there); its notes are imported too
    (:func:`import_csv_all` counts them). Nothing is written if any row is bad."""
    return import_csv_all(store, path, now)[0]


def import_csv_all(store: Any, path: str | Path, now: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Import a CSV's scores and notes: ((scores added, already), (notes added, already))."""
    rows = read_csv(path)
    known = store.reviews.trial_ids_exist(r.trial for _, r in rows)
    for line, row in rows:
        if row.trial not in known:
            raise InputError(Path(path), line, "trial", f"no trial {row.trial} in {store.path}")
    scores = store.reviews.add_score_rows([{"trial_id": r.trial, "reviewer": r.reviewer, "score": r.score,
                                   "note": r.note, "created_at": r.time or now, "role": r.role}
                                  for _, r in rows if r.role != NOTE])
    notes = store.reviews.add_note_rows([{"trial_id": r.trial, "author": r.reviewer, "text": r.note,
                                  "created_at": r.time or now} for _, r in rows if r.role == NOTE])
    return scores, notes


@dataclass
class MergeResult:
    added: int = 0
    already: int = 0
    notes_added: int = 0
    notes_already: int = 0
    unmatched: list[dict[str, Any]] = field(default_factory=list)  # the other store's scores with no trial here


def merge_store(store: Any, other: Any) -> MergeResult:
    """Copy ``other``'s scores into ``store``, matching trials by suite, task, configuration and
    trial index (and attempt, where several attempts share an index)."""
    here: dict[tuple, list] = defaultdict(list)
    for key in store.reviews.trial_keys():
        here[key.match].append(key)
    theirs = {key.id: key for key in other.reviews.trial_keys()}
    result = MergeResult()

    def target(trial_id: int) -> int | None:
        key = theirs.get(trial_id)
        candidates = here.get(key.match, []) if key else []
        if key is None or not candidates:
            return None
        same_attempt = [c for c in candidates if c.attempt == key.attempt]
        return (same_attempt or candidates)[-1].id

    rows, notes = [], []
    for score in other.reviews.score_rows():
        if (trial_id := target(score.trial_id)) is None:
            key = theirs.get(score.trial_id)
            result.unmatched.append({"trial": score.trial_id, "reviewer": score.reviewer, "score": score.score,
                                     "key": key.match if key else None})
            continue
        rows.append({"trial_id": trial_id, "reviewer": score.reviewer, "score": score.score,
                     "note": score.note, "created_at": score.created_at, "role": score.role,
                     "blind": score.blind})
    for note in other.reviews.note_rows():
        if (trial_id := target(note["trial_id"])) is None:
            key = theirs.get(note["trial_id"])
            result.unmatched.append({"trial": note["trial_id"], "reviewer": note["author"], "score": "note",
                                     "key": key.match if key else None})
            continue
        notes.append({**note, "trial_id": trial_id})
    result.added, result.already = store.reviews.add_score_rows(rows, actor="merge")
    result.notes_added, result.notes_already = store.reviews.add_note_rows(notes, actor="merge")
    return result
