"""The store's queries for reviews (``store.reviews``): scores and notes, per-reviewer scores,
adjudications, review plans, score import with de-duplication, trial keys for merging stores,
and compare's step rows.

Scores stay append-only: nothing here updates or deletes a score; an adjudication is one more
row with ``role = 'adjudication'`` (``scores``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..vocab import FINAL_STATUSES, REVIEWABLE_STATUSES
from . import quick
from .group import Queries
from .scores import SCORE_COLUMNS, ScoreRow
from .tx import audit, immediate, utcnow


@dataclass(frozen=True)
class TrialKey:
    """What identifies a trial across stores: suite, task, configuration, trial index (and attempt)."""

    id: int
    suite_id: str
    task_id: str
    model: str
    cli: str
    trial_index: int
    attempt: int

    @property
    def match(self) -> tuple[str, str, str, str, int]:
        return (self.suite_id, self.task_id, self.model, self.cli, self.trial_index)


def _seq_range(first: int | None, last: int | None) -> tuple[int, int]:
    return (-(2**63) if first is None else first, 2**63 - 1 if last is None else last)


def _suite_clause(suite_id: str | None, alias: str = "t") -> tuple[str, list[Any]]:
    return (f" and {alias}.suite_id = ?", [suite_id]) if suite_id is not None else ("", [])


class ReviewQueries(Queries):
    # -- scores and notes (append-only) -----------------------------------------------------

    def add_score(self, trial_id: int, score: int, reviewer: str, note: str | None = None, *,
                  role: str | None = None, blind: bool = False) -> ScoreRow:
        """Append a score; it is committed when this returns. ``role="adjudication"``: the final score."""
        return quick.write_score(self.db.conn, trial_id, score, reviewer, note, role=role, blind=blind)

    def latest_scores(self, suite_id: str | None = None) -> dict[int, ScoreRow]:
        """The current score of every scored trial: the latest edit wins, history stays."""
        sql = ("select s.* from scores s join (select trial_id, max(id) as id from scores group by trial_id) m "
               "on s.id = m.id")
        if suite_id is not None:
            sql += " join trials t on t.id = s.trial_id where t.suite_id = ?"
        rows = self.db.query(sql, [suite_id] if suite_id is not None else [])
        return {r["trial_id"]: ScoreRow(**{k: r[k] for k in ScoreRow.__dataclass_fields__}) for r in rows}

    def score_history(self, trial_id: int) -> list[ScoreRow]:
        return quick.score_history(self.db.conn, trial_id)

    def add_note(self, trial_id: int, text: str, author: str) -> int:
        with immediate(self.db):
            pk = self.db["notes"].insert(
                {"trial_id": trial_id, "text": text, "author": author, "created_at": utcnow()}).last_pk
            audit(self.db, "note", author, trial_id, {"text": text})
        return pk

    # -- scores by reviewer -----------------------------------------------------------------------

    def score_rows(self, suite_id: str | None = None) -> list[ScoreRow]:
        """Every score of a suite (reviews and adjudications), oldest first.

        Works on a store opened read-only before issue 15's migration (merge reads other
        stores without changing them): the missing columns read as NULL."""
        clause, args = _suite_clause(suite_id)
        have = {row[1] for row in self.db.execute("pragma table_info(scores)")}
        columns = ", ".join(f"s.{c}" if c in have else "null" for c in (c.strip() for c in SCORE_COLUMNS.split(",")))
        sql = (f"select {columns} from scores s "
               f"join trials t on t.id = s.trial_id where 1 = 1{clause} order by s.id")
        return [ScoreRow(*row) for row in self.db.execute(sql, args)]

    def reviewer_scores(self, suite_id: str | None = None) -> dict[int, dict[str, ScoreRow]]:
        """trial id -> reviewer -> that reviewer's latest review (adjudications left out)."""
        latest: dict[int, dict[str, ScoreRow]] = defaultdict(dict)
        for row in self.score_rows(suite_id):
            if not row.adjudicated:
                latest[row.trial_id][row.reviewer] = row
        return dict(latest)

    def adjudications(self, suite_id: str | None = None) -> dict[int, ScoreRow]:
        """trial id -> its latest adjudicated score."""
        return {row.trial_id: row for row in self.score_rows(suite_id) if row.adjudicated}

    def trial_tasks(self, suite_id: str | None = None) -> dict[int, str]:
        clause, args = _suite_clause(suite_id)
        return {r[0]: r[1] for r in self.db.execute(f"select t.id, t.task_id from trials t where 1 = 1{clause}", args)}

    def finished_trial_ids(self, suite_id: str | None = None) -> list[int]:
        """The trials a reviewer may score (``vocab.REVIEWABLE_STATUSES``: not infra-invalid)."""
        clause, args = _suite_clause(suite_id)
        statuses = sorted(REVIEWABLE_STATUSES)
        marks = ",".join("?" * len(statuses))
        return [r[0] for r in self.db.execute(
            f"select t.id from trials t where t.status in ({marks}){clause} order by t.id", [*statuses, *args])]

    def add_score_rows(self, rows: Sequence[dict[str, Any]], actor: str = "import") -> tuple[int, int]:
        """Insert scores (dicts of the ``scores`` columns but ``id``) in one transaction, skipping
        any row identical to one already stored (same trial, reviewer, score, note, time, role).
        Returns (added, already there). Used by import and merge: re-running one doubles nothing."""
        added = skipped = 0
        with immediate(self.db):
            for row in rows:
                found = self.db.execute(
                    "select 1 from scores where trial_id = ? and reviewer = ? and score = ? and created_at = ? "
                    "and coalesce(note, '') = coalesce(?, '') and coalesce(role, 'review') = coalesce(?, 'review') "
                    "limit 1", [row["trial_id"], row["reviewer"], row["score"], row["created_at"], row.get("note"),
                                row.get("role")]).fetchone()
                if found:
                    skipped += 1
                    continue
                self.db["scores"].insert({"trial_id": row["trial_id"], "score": row["score"], "note": row.get("note"),
                                          "reviewer": row["reviewer"], "created_at": row["created_at"],
                                          "role": row.get("role"), "blind": row.get("blind")})
                added += 1
            if added:
                audit(self.db, "scores-import", actor, None, {"added": added, "skipped": skipped})
        return added, skipped

    def note_rows(self, suite_id: str | None = None) -> list[dict[str, Any]]:
        """Every reviewer's note of a suite (review's ``n``: the ``notes`` table), oldest first."""
        clause, args = _suite_clause(suite_id)
        return list(self.db.query("select n.trial_id, n.author, n.text, n.created_at from notes n join "
                                  f"trials t on t.id = n.trial_id where 1 = 1{clause} order by n.id", args))

    def add_note_rows(self, rows: Sequence[dict[str, Any]], actor: str = "import") -> tuple[int, int]:
        """Insert notes (``trial_id``, ``author``, ``text``, ``created_at``) in one transaction,
        skipping any identical to one already stored: (added, already there)."""
        added = skipped = 0
        with immediate(self.db):
            for row in rows:
                if self.db.execute("select 1 from notes where trial_id = ? and author = ? and text = ? and "
                                   "created_at = ? limit 1", [row["trial_id"], row["author"], row["text"],
                                                              row["created_at"]]).fetchone():
                    skipped += 1
                    continue
                self.db["notes"].insert({k: row[k] for k in ("trial_id", "author", "text", "created_at")})
                added += 1
            if added:
                audit(self.db, "notes-import", actor, None, {"added": added, "skipped": skipped})
        return added, skipped

    def trial_ids_exist(self, ids: Iterable[int]) -> set[int]:
        wanted = sorted(set(ids))
        found: set[int] = set()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            found.update(r[0] for r in self.db.execute(
                f"select id from trials where id in ({','.join('?' * len(chunk))})", chunk))
        return found

    def trial_keys(self) -> list[TrialKey]:
        return [TrialKey(*r) for r in self.db.execute(
            "select id, suite_id, task_id, model, cli, trial_index, coalesce(attempt, 0) from trials order by id")]

    # -- plans and audit ----------------------------------------------------------------------------

    def review_plan(self, suite_id: str) -> dict[str, int] | None:
        row = self.db.execute("select reviews, disagreement from review_plans where suite_id = ?",
                              [suite_id]).fetchone()
        return None if row is None else {"reviews": row[0], "disagreement": row[1]}

    def set_review_plan(self, suite_id: str, reviews: int | None, disagreement: int | None, actor: str) -> None:

        current = self.review_plan(suite_id) or {}
        plan = {"suite_id": suite_id, "reviews": reviews if reviews is not None else current.get("reviews"),
                "disagreement": disagreement if disagreement is not None else current.get("disagreement"),
                "updated_at": utcnow()}
        with immediate(self.db):
            self.db["review_plans"].upsert(plan, pk="suite_id")
            audit(self.db, "review-plan", actor, None, plan)

    def record_unblinding(self, trial_id: int | None, actor: str, reason: str) -> None:
        """Unblinding is explicit: one audit row, committed before the screen shows anything."""
        with immediate(self.db):
            audit(self.db, "unblind", actor, trial_id, {"reason": reason})

    def audit_rows(self, action: str) -> list[dict[str, Any]]:
        return list(self.db.query("select * from audit where action = ? order by id", [action]))

    # -- blind masking and compare -------------------------------------------------------------------

    def identity_terms(self, suite_id: str) -> list[str]:
        """Names a blind reviewer must not see: models, providers, price keys, CLIs, CLI versions,
        and the suite's id and name (a suite is often named after what it compares)."""
        terms: set[str] = set()
        for row in self.db.execute("select id, name from suites where id = ?", [suite_id]):
            terms.update(v for v in row if v)
        for row in self.db.execute("select model, provider, price_key, cli, cli_version from configurations "
                                   "where suite_id = ?", [suite_id]):
            terms.update(v for v in row if v)
        for row in self.db.execute("select distinct model, cli, cli_version from trials where suite_id = ?",
                                   [suite_id]):
            terms.update(v for v in row if v)
        return sorted(terms)

    def step_rows(self, trial_id: int, label_chars: int = 300, first: int | None = None,
                  last: int | None = None) -> Iterator[tuple]:
        """``(seq, kind, text, data)`` of the events compare builds steps from (with ``first <= seq
        <= last`` when given): texts cut to ``label_chars`` in SQL, no text for tool results and
        ``data`` only for tool calls, so a huge tool output is never read."""
        yield from self.db.execute(
            "select seq, kind, case when kind != 'tool_result' then substr(text, 1, ?) end, "
            "case when kind = 'tool_call' then data end from events "
            "where trial_id = ? and seq between ? and ? and kind in ('assistant', 'tool_call', 'tool_result', 'error') "
            "order by seq", [label_chars, trial_id, *_seq_range(first, last)])

    def step_usage(self, trial_id: int, first: int | None = None, last: int | None = None,
                   source: str | None = None) -> list[tuple[int, int]]:
        """``(seq, raw tokens)`` per usage row (with ``first <= seq <= last`` when given), the
        meter's rows only: the proxy's when it metered the trial (the CLI's own figures beside
        them would count the calls twice), as ``usage_by_seq``. ``source``: the trial's
        ``usage_meter`` when the caller knows it (a caller reading many ranges asks once)."""
        if source is None:
            source = self.usage_meter(trial_id)
        clause = "and source = 'proxy'" if source == "proxy" else ""
        return self.db.execute(
            "select seq, coalesce(uncached_input, 0) + coalesce(cached_input, 0) + coalesce(cache_write, 0) "
            f"+ coalesce(output, 0) + coalesce(reasoning, 0) from usage where trial_id = ? and seq between ? and ? "
            f"{clause} order by seq", [trial_id, *_seq_range(first, last)]).fetchall()

    def usage_meter(self, trial_id: int) -> str:
        """'proxy' when the proxy metered the trial (its usage rows are the ones to count), else 'all'."""
        row = self.db.execute("select 1 from usage where trial_id = ? and source = 'proxy' limit 1",
                              [trial_id]).fetchone()
        return "proxy" if row else "all"

    def first_seq(self, trial_id: int) -> int:
        """The lowest seq of a trial's events (0 if none): one probe of the index."""
        row = self.db.execute("select min(seq) from events where trial_id = ?", [trial_id]).fetchone()
        return row[0] or 0

    def compare_partner(self, trial_id: int) -> int | None:
        """Another finished trial of the same task: the same model under another CLI first, then
        another model under the same CLI, then any; the latest of each kind."""
        row = self.db.execute("select suite_id, task_id, model, cli from trials where id = ?", [trial_id]).fetchone()
        if row is None:
            return None
        suite, task, model, cli = row
        marks = ",".join("?" * len(FINAL_STATUSES))
        found = self.db.execute(
            f"select id from trials where suite_id = ? and task_id = ? and id != ? and status in ({marks}) "
            "order by (model = ? and cli != ?) desc, (cli = ?) desc, id desc limit 1",
            [suite, task, trial_id, *FINAL_STATUSES, model, cli, cli]).fetchone()
        return found[0] if found else None
