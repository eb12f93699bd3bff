"""The store's write transaction, which every write of every process goes through, and the
time stamp its rows carry."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # light commands (score) import these without loading sqlite-utils
    import sqlite_utils


@contextmanager
def immediate(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
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
