"""What reports and trial records read and write: final trials in bulk, and imported ones."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # sqlite-utils loads when a Store opens, not when a light command imports this
    import sqlite_utils

from .tx import immediate

_RUN_SQL = """
select task_id, model, cli, trial_index, status, passed, coalesce(quality, 0.0),
       coalesce(uncached_input, 0) + coalesce(cached_input, 0) + coalesce(cache_write, 0)
         + coalesce(output, 0) + coalesce(reasoning, 0),
       cost_usd, coalesce(attempt, 0), coalesce(turns, 0), coalesce(tool_calls, 0), finished_at, id
from trials where suite_id = ? and status in ({statuses})
"""


class ReportQueries:
    db: sqlite_utils.Database

    def run_tuples(self, suite_id: str, statuses: Iterable[str]) -> Iterator[tuple]:
        """A suite's trials in one of ``statuses`` as tuples ``(task, model, cli, trial_index,
        status, passed, quality, raw_tokens, cost_usd, attempt, turns, tool_calls, finished_at,
        id)``, in one query (reports read tens of thousands)."""
        statuses = sorted(str(s) for s in statuses)
        sql = _RUN_SQL.format(statuses=",".join("?" * len(statuses)))
        return self.db.conn.execute(sql, [suite_id, *statuses])

    def final_trial_rows(self, suite_id: str, statuses: Iterable[str]) -> Iterable[dict[str, Any]]:
        """Whole trial rows of a suite in one of ``statuses``, by id."""
        statuses = sorted(str(s) for s in statuses)
        return self.db.query(
            f"select * from trials where suite_id = ? and status in ({','.join('?' * len(statuses))}) order by id",
            [suite_id, *statuses])

    def cost_checks(self, suite_id: str) -> dict[str, Any]:
        """What a report says about a suite's costs beside the comparable one (issue 14): trials
        flagged ``cost-divergence`` and the provider-charged actual cost with its trial count."""
        row = self.db.execute(
            "select sum(case when flags like '%\"cost-divergence\"%' then 1 else 0 end), "
            "sum(case when cost_actual_source = 'provider' then cost_actual_usd end), "
            "sum(case when cost_actual_source = 'provider' then 1 else 0 end), "
            "sum(case when cost_actual_source = 'provider' then cost_usd end) "
            "from trials where suite_id = ?", [suite_id]).fetchone()
        return {"divergent": int(row[0] or 0), "charged_usd": row[1], "charged_trials": int(row[2] or 0),
                "comparable_of_charged_usd": row[3]}

    def has_differential(self, suite_id: str) -> bool:
        """Whether any trial of the suite was judged by the differential verifier."""
        return self.db.execute("select 1 from trials where suite_id = ? and extra like '%\"kind\":\"differential\"%' "
                               "limit 1", [suite_id]).fetchone() is not None

    def import_trials(self, suites: dict[str, str | None], tasks: list[tuple[str, str, str | None]],
                      rows: list[tuple[tuple[str, str, str], dict[str, Any]]],
                      seed_hashes: dict[str, str] | None = None) -> int:
        """Insert imported trials in one transaction: all of them or none (a row whose
        ``import_key`` is in the store already is left out; the count is of those added).

        ``suites``: suite id -> created_at, for suites the store does not know yet; ``tasks``:
        ``(suite, task, tier)`` in position order (existing task rows are kept); ``rows``:
        ``((suite, model, cli), trial row)``, the configuration id is filled in here;
        ``seed_hashes``: the seed-prompt hash a new suite is made with (the records' own).
        """
        with immediate(self.db):
            for suite_id, created_at in suites.items():
                if next(self.db.query("select 1 from suites where id = ?", [suite_id]), None) is None:
                    self.db.table("suites").insert({"id": suite_id, "name": suite_id, "created_at": created_at,
                                              "seed_hash": (seed_hashes or {}).get(suite_id)})
            for position, (suite_id, task_id, tier) in enumerate(tasks):
                self.db.table("tasks").insert({"suite_id": suite_id, "task_id": task_id, "tier": tier,
                                         "position": position}, pk=("suite_id", "task_id"), ignore=True)
            config_ids: dict[tuple[str, str, str], int] = {}
            out = []
            keys: set[str] = set()
            for key, row in rows:
                if row.get("import_key") and (row["import_key"] in keys or self.db.execute(
                        "select 1 from trials where import_key = ?", [row["import_key"]]).fetchone()):
                    continue  # imported before (or twice in this batch): importing again adds nothing
                keys.add(row.get("import_key") or "")
                if key not in config_ids:
                    config_ids[key] = self.ensure_configuration(*key)  # type: ignore[attr-defined]
                out.append({**row, "config_id": config_ids[key]})
            self.db.table("trials").insert_all(out, batch_size=2000)
        return len(out)
