"""The store for one-shot commands, on the standard library's sqlite3 alone.

``agentmeter score`` is scripted by reviewers hundreds of times in a row; loading sqlite-utils
(and the numpy it pulls in) would cost more than the score itself. These functions take a plain
``sqlite3.Connection`` so that :class:`~agentmeter_tui.core.store.Store` runs the very same SQL
(its ``db.conn``, in ``store.reviews``): one definition of a score write, whichever door it comes through. A store whose
schema is not current is opened through the full Store instead, which migrates it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ..vocab import unreviewable
from .migrations import is_current
from .scores import ADJUDICATION, SCORE_COLUMNS, ScoreRow
from .tx import inserted_id, utcnow


def open_current(path: str | Path) -> sqlite3.Connection | None:
    """A connection to an existing store whose migrations have all run, else None."""
    conn = sqlite3.connect(str(path), timeout=30)
    conn.execute("PRAGMA busy_timeout=30000")
    if not is_current(conn):
        conn.close()
        return None
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def trial_row(conn: sqlite3.Connection, trial_id: int) -> dict[str, Any] | None:
    cursor = conn.execute("select * from trials where id = ?", [trial_id])
    row = cursor.fetchone()
    return None if row is None else dict(zip([c[0] for c in cursor.description], row, strict=True))


def score_history(conn: sqlite3.Connection, trial_id: int) -> list[ScoreRow]:
    rows = conn.execute(f"select {SCORE_COLUMNS} from scores where trial_id = ? order by id", [trial_id])
    return [ScoreRow(*row) for row in rows]


def write_score(conn: sqlite3.Connection, trial_id: int, score: int, reviewer: str, note: str | None = None,
                *, role: str | None = None, blind: bool = False) -> ScoreRow:
    """Append a score and its audit row in one immediate transaction; committed on return."""
    if score not in (0, 1, 2, 3):
        raise ValueError(f"score must be 0, 1, 2 or 3, not {score!r}")
    now = utcnow()
    blind_mark = 1 if blind else None
    detail = json.dumps({"score": score, "note": note, "blind": blind}, default=str)
    outer = conn.in_transaction
    if not outer:
        conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("select status from trials where id = ?", [trial_id]).fetchone()
        if row is None:
            raise KeyError(f"no trial {trial_id}")
        if (why := unreviewable(trial_id, row[0])) is not None:
            raise ValueError(why)
        pk = inserted_id(conn.execute(
            "insert into scores (trial_id, score, note, reviewer, created_at, role, blind) values (?, ?, ?, ?, ?, ?, ?)",
            [trial_id, score, note, reviewer, now, role, blind_mark]))
        conn.execute("insert into audit (ts, actor, action, trial_id, detail) values (?, ?, ?, ?, ?)",
                     [now, reviewer, "adjudicate" if role == ADJUDICATION else "score", trial_id, detail])
    except BaseException:
        if not outer and conn.in_transaction:
            conn.rollback()
        raise
    if not outer:
        conn.commit()
    return ScoreRow(pk, trial_id, score, note, reviewer, now, role, blind_mark)


def trial_choices(path: str | Path, limit: int = 2000) -> list[tuple[int, str]]:
    """Trial ids with a short description, newest first, for shell completion. Opened read-only
    and never migrated: a completion must not write, wait on a lock, or fail loudly."""
    try:
        conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, timeout=0.2)
        try:
            rows = conn.execute("select id, task_id, model, cli, status from trials order by id desc limit ?",
                                [limit]).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []
    return [(row[0], f"{row[1]} {row[2]}/{row[3]} {row[4]}") for row in rows]
