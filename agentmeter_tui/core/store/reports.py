"""What reports and trial records read and write (``store.reports``): final trials in bulk, and
imported ones."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .group import Configurations, Queries
from .regrades import LATEST_VERDICT, RegradeQueries, latest_verdict_join
from .tx import immediate

if TYPE_CHECKING:
    from .lazydb import Database

# The verdict counted is the latest regrade's, when there is one (regrades.py), else the trial's own.
_RUN_SQL = """
select t.task_id, t.model, t.cli, t.trial_index, coalesce(r.status, t.status), coalesce(r.passed, t.passed),
       coalesce(r.quality, t.quality, 0.0),
       coalesce(t.uncached_input, 0) + coalesce(t.cached_input, 0) + coalesce(t.cache_write, 0)
         + coalesce(t.output, 0) + coalesce(t.reasoning, 0),
       t.cost_usd, coalesce(t.attempt, 0), coalesce(t.turns, 0), coalesce(t.tool_calls, 0), t.finished_at, t.id
from trials t {join} where t.suite_id = ? and coalesce(r.status, t.status) in ({statuses})
"""
_REGRADED = ("status", "passed", "quality", "reason", "verifier_exit", "verifier_output")


class ReportQueries(Queries):
    """``regrades``: whose latest verdict a trial counts with; ``configurations``: where an imported
    trial's configuration row is found or made."""

    def __init__(self, db: Database, regrades: RegradeQueries, configurations: Configurations):
        super().__init__(db)
        self.regrades, self.configurations = regrades, configurations

    def run_tuples(self, suite_id: str, statuses: Iterable[str]) -> Iterator[tuple]:
        """A suite's trials in one of ``statuses`` as tuples ``(task, model, cli, trial_index,
        status, passed, quality, raw_tokens, cost_usd, attempt, turns, tool_calls, finished_at,
        id)``, in one query (reports read tens of thousands)."""
        statuses = sorted(str(s) for s in statuses)
        sql = _RUN_SQL.format(statuses=",".join("?" * len(statuses)), join=latest_verdict_join(self.regrades))
        return self.db.conn.execute(sql, [suite_id, *statuses])

    def final_trial_rows(self, suite_id: str, statuses: Iterable[str]) -> Iterable[dict[str, Any]]:
        """Whole trial rows of a suite in one of ``statuses``, by id; a regraded trial's row carries
        its latest regrade's verdict, the original under ``original_<column>``, and ``regraded_at``
        and ``regrade_verifier_hash``."""
        statuses = sorted(str(s) for s in statuses)
        picked = ", ".join(f"r.{key} as regrade_{key}" for key in (*_REGRADED, "created_at", "verifier_hash", "id"))
        join = latest_verdict_join(self.regrades)
        if join != LATEST_VERDICT:
            picked = "r.id as regrade_id"
        rows = self.db.query(
            f"select t.*, {picked} from trials t {join} where t.suite_id = ? and coalesce(r.status, t.status) "
            f"in ({','.join('?' * len(statuses))}) order by t.id", [suite_id, *statuses])
        return (_with_regrade(row) for row in rows)

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
                    config_ids[key] = self.configurations.ensure_configuration(*key)
                out.append({**row, "config_id": config_ids[key]})
            self.db.table("trials").insert_all(out, batch_size=2000)
        return len(out)


def _with_regrade(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its latest regrade's verdict in place of its own (kept as ``original_*``)."""
    regrade = {key[len("regrade_"):]: row.pop(key) for key in list(row) if key.startswith("regrade_")}
    if regrade.get("id") is None:
        return row
    for key in _REGRADED:
        row[f"original_{key}"], row[key] = row[key], regrade[key]
    row["regraded_at"], row["regrade_verifier_hash"] = regrade["created_at"], regrade["verifier_hash"]
    return row
