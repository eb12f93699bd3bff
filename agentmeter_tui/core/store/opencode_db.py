"""Reading opencode's own SQLite store (``~/.local/share/opencode/opencode.db``), read-only,
for ``agentmeter import sessions --cli opencode``. Its queries live here with the project's
other SQL; nothing is ever written to that file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def opencode_sessions(path: Path) -> Iterator[dict[str, Any]]:
    """Each session row (``id``, ``directory``, ``title``, ``version``, ``time_created``, ...) with its
    ``messages`` and ``parts`` (``data`` JSON text each) in creation order."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        for session in conn.execute("select * from session order by time_created"):
            row = dict(session)
            row["messages"] = [dict(r) for r in conn.execute(
                "select id, time_created, data from message where session_id = ? order by time_created, id", [row["id"]])]
            row["parts"] = [dict(r) for r in conn.execute(
                "select id, message_id, time_created, data from part where session_id = ? order by time_created, id",
                [row["id"]])]
            yield row
    finally:
        conn.close()
