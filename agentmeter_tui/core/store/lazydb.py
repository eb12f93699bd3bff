"""The store's connection: plain sqlite3 for queries, sqlite-utils when a table is needed.

Screens and reads only ever run SQL (``execute``, ``query``), while importing sqlite-utils,
and numpy through it, took a third of the TUI's start (160-260 ms of ~0.8 s). So
:class:`Database` answers those itself, exactly as ``sqlite_utils.Database`` does, and builds
the real one on the same connection the first time anything else is asked of it: a table
(``db["trials"]``), a savepoint (``atomic``), a migration.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils
    from sqlite_utils.db import Table


class Database:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self._full: sqlite_utils.Database | None = None
        self._lock = threading.Lock()  # the store's connection is shared by threads (the UI's workers)

    def full(self) -> sqlite_utils.Database:
        if self._full is None:
            with self._lock:
                if self._full is None:
                    import sqlite_utils

                    self._full = sqlite_utils.Database(self.conn)
        return self._full

    def execute(self, sql: str, parameters: Any = None) -> sqlite3.Cursor:
        if self._full is not None:  # its tracer, if one was set, sees every statement
            return self._full.execute(sql, parameters)
        return self.conn.execute(sql) if parameters is None else self.conn.execute(sql, parameters)

    def query(self, sql: str, params: Any = None) -> Iterator[dict[str, Any]]:
        cursor = self.execute(sql, params or ())
        keys = [d[0] for d in cursor.description]
        for row in cursor:
            yield dict(zip(keys, row))

    def table_names(self) -> list[str]:
        return [r[0] for r in self.execute("select name from sqlite_master where type = 'table'")]

    def table(self, name: str) -> Table:  # typed, unlike what __getattr__ hands on
        return self.full().table(name)

    def __getitem__(self, name: str) -> Any:
        return self.full()[name]

    def __getattr__(self, name: str) -> Any:  # everything else sqlite-utils has
        return getattr(self.full(), name)
