"""The store's write transaction, which every write of every process goes through, the time
stamp its rows carry, and the audit row several kinds of write leave inside theirs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3

    from .lazydb import Database


@contextmanager
def immediate(db: Database) -> Iterator[Database]:
    """A write transaction that takes the write lock up front (BEGIN IMMEDIATE).

    Several processes write one store (the runner, a reviewer's scores, an import). A
    deferred transaction that reads before it writes can fail at once with "database is
    locked" when another process commits in between, without waiting; an immediate one waits
    its turn under the busy timeout. Inside another transaction the body runs in sqlite-utils'
    ``atomic()`` (a savepoint); the outermost one needs none (its rollback undoes the body).
    """
    if db.conn.in_transaction:
        with db.atomic():
            yield db
        return
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if db.conn.in_transaction:
            db.conn.rollback()
        raise
    db.conn.commit()


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def inserted_id(cursor: sqlite3.Cursor) -> int:
    """The rowid an ``insert`` statement's cursor gave its row."""
    row_id = cursor.lastrowid
    assert row_id is not None  # an insert always sets it
    return row_id


def audit(db: Database, action: str, actor: str, trial_id: int | None = None, detail: Any = None) -> None:
    """One audit row, written inside the caller's transaction."""
    db["audit"].insert({"ts": utcnow(), "actor": actor, "action": action, "trial_id": trial_id,
                        "detail": json.dumps(detail, default=str) if detail is not None else None})
