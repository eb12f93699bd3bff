"""What the screens and ``doctor`` read (``store.views``): a suite's shape, the grid's rows, one trial's cell,
notes, the review queue and a transcript's events.

The UI runs these on its store thread (``ui.data.StoreThread``) and shapes the results there;
the runner may write meanwhile (WAL), so each is one statement or a few short ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .group import Queries

GRID_COLUMNS = ("id, model, cli, task_id, trial_index, status, reason, uncached_input, cached_input, cache_write, "
                "output, reasoning, cost_usd, flags, source, imported, node")
# A tool result counts as a failure when its raw line says so in one of the shapes the CLIs use
# (the parser's is_error is not stored): a non-zero exit code, is_error true, or an error status.
# CASE guards json_extract, which raises on lines that are not JSON.
FAILURE_SQL = (
    "select seq from events where trial_id = ? and (kind = 'error' or (kind = 'tool_result' and data is not null "
    "and case when json_valid(data) then coalesce(json_extract(data, '$.exit_code'), 0) not in (0, '0') "
    "or json_extract(data, '$.is_error') in (1, 'true') or json_extract(data, '$.status') in ('error', 'failed') "
    "else 0 end))")


class ViewQueries(Queries):
    # -- a suite's shape ----------------------------------------------------------------------

    def latest_trial_suite(self) -> str | None:
        """The suite of the newest trial (a store of imported trials has no suite rows to go by)."""
        row = next(self.db.query("select suite_id as id from trials order by id desc limit 1"), None)
        return row["id"] if row else None

    def configuration_pairs(self, suite_id: str) -> list[tuple[str, str]]:
        """``(model, cli)`` of a suite's configurations, in suite order."""
        return [(r["model"], r["cli"]) for r in self.db.query(
            "select model, cli from configurations where suite_id = ? order by id", [suite_id])]

    def task_tiers(self, suite_id: str) -> dict[str, str | None]:
        """Task id -> tier, in suite order."""
        return {r["task_id"]: r["tier"] for r in self.db.query(
            "select task_id, tier from tasks where suite_id = ? order by position, task_id", [suite_id])}

    def trial_task_ids(self, suite_id: str) -> list[str]:
        """The tasks a suite's trials ran, by name (for stores without task rows)."""
        return [r["task_id"] for r in self.db.query(
            "select distinct task_id from trials where suite_id = ? order by task_id", [suite_id])]

    def max_trial_index(self, suite_id: str) -> int | None:
        return self.db.execute("select max(trial_index) from trials where suite_id = ?", [suite_id]).fetchone()[0]

    # -- the grid and one cell ----------------------------------------------------------------

    def grid_rows(self, suite_id: str) -> list[dict[str, Any]]:
        return list(self.db.query(f"select {GRID_COLUMNS} from trials where suite_id = ? order by id", [suite_id]))

    def cell_trials(self, suite_id: str, task_id: str, model: str, cli: str) -> list[dict[str, Any]]:
        """A cell's trials (same task and configuration) with raw tokens and current score."""
        return list(self.db.query(
            "select t.id, t.trial_index, t.status, t.reason, t.cost_usd, "
            "t.uncached_input + t.cached_input + t.cache_write + t.output + t.reasoning as raw, "
            "(select s.score from scores s where s.trial_id = t.id order by s.id desc limit 1) as score "
            "from trials t where t.suite_id = ? and t.task_id = ? and t.model = ? and t.cli = ? "
            "order by t.trial_index, t.id",
            [suite_id, task_id, model, cli]))

    def notes(self, trial_id: int) -> list[dict[str, Any]]:
        return list(self.db.query("select * from notes where trial_id = ? order by id", [trial_id]))

    def review_queue(self, suite_id: str | None, statuses: Iterable[str], flag: str | None = None,
                     by_flags: bool = False) -> list[tuple[int, bool]]:
        """Trials in one of ``statuses`` in review order (by id) and whether each has a score.
        ``flag``: only trials a scanner flagged so (issue 35); ``by_flags``: flagged trials
        first, the most flags first (a flag a reviewer called wrong does not count)."""
        statuses = [str(s) for s in statuses]
        where = "t.status in ({})".format(",".join("?" * len(statuses)))
        params: list[Any] = statuses
        if suite_id is not None:
            where += " and t.suite_id = ?"
            params.append(suite_id)
        if flag is not None:
            where += " and exists(select 1 from flags f where f.trial_id = t.id and f.scanner = ?)"
            params.append(flag)
        order = "t.id"
        if by_flags:
            order = ("(select count(*) from flags f where f.trial_id = t.id and coalesce((select v.verdict from "
                     "flag_verdicts v where v.flag_id = f.id order by v.id desc limit 1), '') != 'wrong') desc, t.id")
        sql = (f"select t.id, exists(select 1 from scores s where s.trial_id = t.id) as scored from trials t "
               f"where {where} order by {order}")
        return [(r[0], bool(r[1])) for r in self.db.execute(sql, params)]

    # -- a transcript ---------------------------------------------------------------------------

    def tail_events(self, trial_id: int, count: int, chars: int) -> list[tuple]:
        """The last ``count`` events as ``(seq, ts, kind, stream, text[:chars])``, oldest first."""
        rows = self.db.execute(
            "select seq, ts, kind, stream, substr(text, 1, ?) from events where trial_id = ? "
            "order by seq desc limit ?", [chars, trial_id, count]).fetchall()
        rows.reverse()
        return rows

    def event_texts(self, trial_id: int, first: int = 0, last: int | None = None,
                    ) -> Iterator[tuple[int, str, str | None]]:
        """``(seq, kind, text)`` of a trial's events with ``first <= seq <= last`` (default: all),
        in order (a cursor: read it once). A range is a walk of the (trial_id, seq) index."""
        if last is None:
            return self.db.execute("select seq, kind, text from events where trial_id = ? and seq >= ? order by seq",
                                   [trial_id, first])
        return self.db.execute("select seq, kind, text from events where trial_id = ? and seq between ? and ? "
                               "order by seq", [trial_id, first, last])

    def failure_seqs(self, trial_id: int, first: int = 0, last: int | None = None) -> set[int]:
        """Seqs of a trial's errors and failed tool results (with ``first <= seq <= last``)."""
        sql = FAILURE_SQL + " and seq between ? and ?"
        return {row[0] for row in self.db.execute(sql, [trial_id, first, last if last is not None else 2**62])}

    def next_failure_seq(self, trial_id: int, after: int, backwards: bool = False) -> int | None:
        """The seq of the next (or previous) error or failed tool result after ``after``."""
        op, order = ("<", "desc") if backwards else (">", "asc")
        row = self.db.execute(FAILURE_SQL + f" and seq {op} ? order by seq {order} limit 1",
                              [trial_id, after]).fetchone()
        return row[0] if row else None

    def last_seq(self, trial_id: int) -> int:
        """The highest seq of a trial's events (0 if none): one probe of the index."""
        row = self.db.execute("select max(seq) from events where trial_id = ?", [trial_id]).fetchone()
        return row[0] or 0

    def event_text(self, trial_id: int, seq: int) -> str:
        row = self.db.execute("select text from events where trial_id = ? and seq = ?", [trial_id, seq]).fetchone()
        return (row[0] or "") if row else ""

    # -- the store itself (doctor) --------------------------------------------------------------

    def health(self, active: Iterable[str]) -> dict[str, Any]:
        """Applied migrations, the number of trials and of trials in one of ``active`` statuses,
        read without migrating (the store may be older than this code)."""
        tables = set(self.db.table_names())
        applied = {row["name"] for row in self.db["_migrations"].rows} if "_migrations" in tables else set()
        trials = self.db["trials"].count if "trials" in tables else 0
        active = sorted(str(s) for s in active)
        running = self.db.execute(f"select count(*) from trials where status in ({','.join('?' * len(active))})",
                                  active).fetchone()[0] if trials else 0
        return {"applied": applied, "trials": trials, "active": running}
