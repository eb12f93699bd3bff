"""The store's queries for triage flags (issue 35): scanners' findings per trial, which trials
were scanned, and reviewers' verdicts on a flag.

``store.flags``. Findings come from a finished trial's events, which never
change, so a trial is scanned once (``flag_scans``) and its flags are only added. Verdicts are
append-only: a reviewer who changes their mind adds a row; the latest is the verdict shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .group import Queries
from .tx import audit, immediate, inserted_id, utcnow

VERDICTS = ("right", "wrong")


@dataclass(frozen=True)
class FlagRow:
    id: int
    trial_id: int
    scanner: str
    evidence: tuple[int, ...]  # event seqs
    why: str | None
    created_at: str
    verdict: str | None = None  # the latest reviewer's verdict, if any
    reviewer: str | None = None


@dataclass(frozen=True)
class VerdictRow:
    id: int
    flag_id: int
    verdict: str
    reviewer: str
    note: str | None
    created_at: str


class FlagQueries(Queries):
    def unscanned(self, statuses: Iterable[str], suite_id: str | None = None,
                  trial_ids: Sequence[int] | None = None) -> list[int]:
        """Finished trials (in ``statuses``; of ``suite_id``, among ``trial_ids`` when given) no
        scan has read yet, by id."""
        statuses = [str(s) for s in statuses]
        sql = (f"select t.id from trials t where t.status in ({', '.join('?' * len(statuses))}) "
               "and not exists (select 1 from flag_scans f where f.trial_id = t.id)")
        args: list[Any] = statuses
        if suite_id is not None:
            sql += " and t.suite_id = ?"
            args.append(suite_id)
        if trial_ids is not None:
            sql += f" and t.id in ({', '.join('?' * len(trial_ids))})"
            args.extend(trial_ids)
        return [row[0] for row in self.db.execute(sql + " order by t.id", args)]

    def record_scan(self, trial_id: int, findings: Sequence[Any], scanners: Sequence[str]) -> int:
        """Store one trial's findings (``.scanner``, ``.evidence``, ``.why``) and mark it scanned,
        in one transaction; a flag already stored is kept. Returns the flags added."""
        return self.record_scans([(trial_id, findings)], scanners)

    def record_scans(self, scanned: Sequence[tuple[int, Sequence[Any]]], scanners: Sequence[str]) -> int:
        """:meth:`record_scan` for several trials, in one transaction (trials that finish together
        are scanned together: one commit, not one each)."""
        now, added = utcnow(), 0
        with immediate(self.db):
            for trial_id, findings in scanned:
                for found in findings:
                    cursor = self.db.execute(
                        "insert or ignore into flags (trial_id, scanner, evidence, why, created_at) "
                        "values (?, ?, ?, ?, ?)", [trial_id, found.scanner, json.dumps(list(found.evidence)), found.why, now])
                    added += cursor.rowcount
                self.db.execute("insert or replace into flag_scans (trial_id, scanners, scanned_at) values (?, ?, ?)",
                                [trial_id, ",".join(scanners), now])
        return added

    def flags_of(self, trial_ids: Sequence[int] | None = None) -> dict[int, list[FlagRow]]:
        """Flags by trial (every trial's when ``trial_ids`` is None), each with its latest verdict;
        none from a store written before the flags existed (read-only, not migrated)."""
        if not self.db.execute("select 1 from sqlite_master where type = 'table' and name = 'flags'").fetchone():
            return {}
        sql = ("select f.id, f.trial_id, f.scanner, f.evidence, f.why, f.created_at, v.verdict, v.reviewer "
               "from flags f left join flag_verdicts v on v.id = "
               "(select max(id) from flag_verdicts where flag_id = f.id)")
        args: list[Any] = []
        if trial_ids is not None:
            sql += f" where f.trial_id in ({', '.join('?' * len(trial_ids))})"
            args = list(trial_ids)
        found: dict[int, list[FlagRow]] = {}
        for row in self.db.execute(sql + " order by f.trial_id, f.scanner", args):
            flag = FlagRow(row[0], row[1], row[2], tuple(json.loads(row[3] or "[]")), *row[4:])
            found.setdefault(flag.trial_id, []).append(flag)
        return found

    def add_flag_verdict(self, flag_id: int, verdict: str, reviewer: str, note: str | None = None) -> int:
        """A reviewer's verdict on a flag (``right``: the trial shows it; ``wrong``: a false alarm)."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}")
        with immediate(self.db):
            row = self.db.execute("select trial_id from flags where id = ?", [flag_id]).fetchone()
            if row is None:
                raise KeyError(f"no flag {flag_id}")
            cursor = self.db.execute(
                "insert into flag_verdicts (flag_id, verdict, reviewer, note, created_at) values (?, ?, ?, ?, ?)",
                [flag_id, verdict, reviewer, note, utcnow()])
            audit(self.db, "flag-verdict", reviewer, row[0], {"flag": flag_id, "verdict": verdict})
        return inserted_id(cursor)

    def flag_verdicts(self, flag_id: int) -> list[VerdictRow]:
        return [VerdictRow(*row) for row in self.db.execute(
            "select id, flag_id, verdict, reviewer, note, created_at from flag_verdicts where flag_id = ? order by id",
            [flag_id])]
