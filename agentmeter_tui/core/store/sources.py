"""The store's queries for where a suite came from (issue 34): the suite.toml a command line
implied, and each dataset task's pinned source (``store.sources``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from .group import Queries
from .tx import immediate, utcnow


class SourceQueries(Queries):
    def record_suite_file(self, suite_id: str, toml: str, command: str) -> None:
        with immediate(self.db):
            self.db["suite_files"].upsert({"suite_id": suite_id, "toml": toml, "command": command,
                                           "created_at": utcnow()}, pk="suite_id")

    def suite_file(self, suite_id: str | None = None) -> dict | None:
        """The implied suite's row (``suite_id``, or the newest), or None."""
        if "suite_files" not in self.db.table_names():
            return None
        if suite_id is None:
            return next(self.db.query("select * from suite_files order by created_at desc limit 1"), None)
        return next(self.db.query("select * from suite_files where suite_id = ?", [suite_id]), None)

    def recorded_hash(self, git_url: str, commit_id: str, path: str) -> tuple[str, str] | None:
        """(task id, tree hash) some run of this store fetched for that commit's folder, if any."""
        row = next(self.db.query("select task_id, tree_hash from task_sources where git_url = ? and commit_id = ? "
                                 "and path = ? limit 1", [git_url, commit_id, path]), None)
        return (row["task_id"], row["tree_hash"]) if row else None

    def record_task_sources(self, suite_id: str, sources: Iterable[Any]) -> None:
        with immediate(self.db):
            for source in sources:
                self.db["task_sources"].upsert({"suite_id": suite_id, **asdict(source), "recorded_at": utcnow()},
                                               pk=("suite_id", "task_id"))

    def task_sources(self, suite_id: str) -> list[dict]:
        return list(self.db.query("select * from task_sources where suite_id = ? order by task_id", [suite_id]))
