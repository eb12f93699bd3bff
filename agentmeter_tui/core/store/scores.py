"""A score as the store keeps it. Scores are append-only: an edit is one more row, and an
adjudication (the final word on a trial several reviewers scored) is a row with
``role = 'adjudication'``. Its own module because both the store's review queries and the light
``score`` command's plain-sqlite3 path (``quick``) read and write these rows.
"""

from __future__ import annotations

from dataclasses import dataclass

ADJUDICATION = "adjudication"
SCORE_COLUMNS = "id, trial_id, score, note, reviewer, created_at, role, blind"


@dataclass(frozen=True)
class ScoreRow:
    id: int
    trial_id: int
    score: int
    note: str | None
    reviewer: str
    created_at: str
    role: str | None = None  # None or "review": a reviewer's score; "adjudication": the final word
    blind: int | None = None  # 1 when given in blind mode

    @property
    def adjudicated(self) -> bool:
        return self.role == ADJUDICATION
