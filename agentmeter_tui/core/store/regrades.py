"""The store's queries for regrades (issue 35): the verdicts a task's current verifier gave on a
trial's kept final workspace, after the run.

``store.regrades``. Append-only: a regrade is a new row, the trial's own verdict
in ``trials`` is never changed; what counts in a report is the latest regrade that gave a
verdict (``passed`` or ``failed``: a regrade whose verifier failed on our side gives none), else
the trial's own (:data:`LATEST_VERDICT`, joined by ``reports.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .group import Queries
from .tx import audit, immediate, inserted_id, utcnow

VERDICTS = ("passed", "failed")  # a regrade's statuses that replace the trial's verdict in reports
# The latest regrade of trial ``t`` that gave a verdict, as ``r`` (a left join: NULL when none).
LATEST_VERDICT = ("left join regrades r on r.id = (select max(g.id) from regrades g where g.trial_id = t.id "
                  "and g.status in ('passed', 'failed'))")
NO_REGRADES = "left join (select null as id, null as status, null as passed, null as quality) r on 0"


def latest_verdict_join(regrades: RegradeQueries) -> str:
    """The join giving ``r``, the counted regrade; one that matches nothing on an older store."""
    return LATEST_VERDICT if regrades.has_regrades() else NO_REGRADES


@dataclass(frozen=True)
class RegradeRow:
    id: int
    trial_id: int
    status: str
    passed: bool
    quality: float | None
    reason: str | None
    verifier_exit: int | None
    verifier_output: str | None
    verifier_hash: str
    sandbox: str | None
    created_at: str


class RegradeQueries(Queries):
    def has_regrades(self) -> bool:
        """Whether the store has the regrades table (a read-only store of an older release has not)."""
        return self.db.execute("select 1 from sqlite_master where type = 'table' and name = 'regrades'"
                               ).fetchone() is not None

    def set_kept(self, trial_id: int, name: str | None) -> None:
        with immediate(self.db):
            self.db.execute("update trials set kept = ? where id = ?", [name, trial_id])

    def add_regrade(self, trial_id: int, status: str, passed: bool, quality: float | None, *, reason: str | None,
                    verifier_exit: int | None, verifier_output: str | None, verifier_hash: str,
                    sandbox: str | None) -> int:
        """Append one regrade's verdict (and an audit line), in one transaction."""
        with immediate(self.db):
            cursor = self.db.execute(
                "insert into regrades (trial_id, status, passed, quality, reason, verifier_exit, verifier_output, "
                "verifier_hash, sandbox, created_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [trial_id, status, int(passed), quality, reason, verifier_exit, verifier_output, verifier_hash,
                 sandbox, utcnow()])
            audit(self.db, "regrade", "agentmeter regrade", trial_id, {"status": status, "verifier_hash": verifier_hash})
        return inserted_id(cursor)

    def regrades_of(self, trial_ids: Sequence[int] | None = None) -> dict[int, list[RegradeRow]]:
        """Regrades by trial, oldest first (every trial's when ``trial_ids`` is None)."""
        if not self.has_regrades():
            return {}
        sql = ("select id, trial_id, status, passed, quality, reason, verifier_exit, verifier_output, "
               "verifier_hash, sandbox, created_at from regrades")
        args: list[Any] = []
        if trial_ids is not None:
            sql += f" where trial_id in ({', '.join('?' * len(trial_ids))})"
            args = list(trial_ids)
        found: dict[int, list[RegradeRow]] = {}
        for row in self.db.execute(sql + " order by trial_id, id", args):
            regrade = RegradeRow(row[0], row[1], row[2], bool(row[3]), *row[4:])
            found.setdefault(regrade.trial_id, []).append(regrade)
        return found

    def regraded_verdicts(self, suite_id: str) -> list[dict[str, Any]]:
        """The suite's trials whose counted verdict is a regrade's: trial id, task, model, CLI,
        the original status and the latest regrade's status, time and verifier hash."""
        if not self.has_regrades():
            return []
        sql = ("select t.id, t.task_id, t.model, t.cli, t.status, r.status, r.created_at, r.verifier_hash "
               f"from trials t {LATEST_VERDICT} where t.suite_id = ? and r.id is not null order by t.id")
        keys = ("trial_id", "task", "model", "cli", "original", "regraded", "at", "verifier_hash")
        return [dict(zip(keys, row, strict=True)) for row in self.db.execute(sql, [suite_id])]
