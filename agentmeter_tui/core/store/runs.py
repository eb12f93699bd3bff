"""The run engine's queries (``store.runs``): a run's row, its trials' rows, and what a restart finds.

Called on the runner's store-writer thread (``StoreWriter.call``), so every write here is the
single writer's; each is one immediate transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..usage import TOKEN_CLASSES
from .group import Queries
from .tx import immediate

_TOKENS = (*TOKEN_CLASSES, "cache_write_1h")  # a trial's counter columns, as its usage rows have them


class RunQueries(Queries):
    # -- runs ---------------------------------------------------------------------------------

    def insert_run(self, row: dict[str, Any]) -> int:
        with immediate(self.db):
            run_id = self.db.table("runs").insert(row).last_pk
        assert isinstance(run_id, int)  # an insert into a rowid table gives its integer id
        return run_id

    def update_run(self, run_id: int, fields: dict[str, Any]) -> None:
        with immediate(self.db):
            self.db.table("runs").update(run_id, fields)

    def delete_run(self, run_id: int) -> None:
        """A run that never started (its preflight failed before any trial): no row is kept."""
        with immediate(self.db):
            self.db.execute("delete from runs where id = ? and not exists "
                            "(select 1 from trials where run_id = ?)", [run_id, run_id])

    def last_run_status(self) -> str | None:
        row = next(self.db.query("select status from runs order by id desc limit 1"), None)
        return row["status"] if row else None

    def last_run(self) -> dict[str, Any] | None:
        """The newest run's row with its trials' outcome: ``statuses`` {status: count},
        ``tokens`` and ``cost_usd`` (every trial of the run, infra-invalid ones included)."""
        run = next(self.db.query("select id, suite_id, status, pid, started_at, finished_at from runs "
                                 "order by id desc limit 1"), None)
        if run is None:
            return None
        run["statuses"] = {r["status"]: r["n"] for r in self.db.query(
            "select status, count(*) as n from trials where run_id = ? group by status order by status", [run["id"]])}
        run.update(next(self.db.query(
            "select coalesce(sum(uncached_input + cached_input + cache_write + output + reasoning), 0) as tokens, "
            "sum(cost_usd) as cost_usd from trials where run_id = ?", [run["id"]])))
        return run

    # -- trials -------------------------------------------------------------------------------

    # A trial's row is written several times per trial (made, running, verifying, final): in
    # plain SQL, since sqlite-utils' insert and update read the table's layout and the row
    # back each time, most of a trivial trial's writer time (benchmarks/overhead.py).

    def insert_trial(self, row: dict[str, Any]) -> int:
        names = list(row)
        with immediate(self.db):
            trial_id = self.db.conn.execute(
                f"insert into trials ({', '.join(map(_quoted, names))}) values ({', '.join('?' * len(names))})",
                [row[name] for name in names]).lastrowid
        assert trial_id is not None  # an insert always sets it
        return trial_id

    def update_trial(self, trial_id: int, fields: dict[str, Any]) -> None:
        if not fields:
            return
        with immediate(self.db):
            changed = self.db.conn.execute(*trial_update(trial_id, fields)).rowcount
        if changed != 1:
            raise LookupError(f"no trial {trial_id} in the store")

    def count_trials(self, suite_id: str | None, statuses: Iterable[str]) -> int:
        """Trials of a suite (of every suite when None) in one of ``statuses``."""
        statuses = sorted(str(s) for s in statuses)
        sql = f"select count(*) from trials where status in ({','.join('?' * len(statuses))})"
        params: list[Any] = list(statuses)
        if suite_id is not None:
            sql += " and suite_id = ?"
            params.append(suite_id)
        return self.db.execute(sql, params).fetchone()[0]

    def trial_tokens(self, suite_id: str, statuses: Iterable[str]) -> list[dict[str, Any]]:
        """``id`` and ``proc_token`` of a suite's trials in one of ``statuses``."""
        statuses = sorted(str(s) for s in statuses)
        return list(self.db.query(
            f"select id, proc_token from trials where suite_id = ? and status in ({','.join('?' * len(statuses))})",
            [suite_id, *statuses]))

    def close_lost_trials(self, trial_ids: Iterable[int], status: str, reason: str) -> None:
        """Trials a dead runner left: ``status`` and ``reason``, and what they spent counted from
        their usage rows, which reached the store as they came while their row's counters were
        written only at the end. The proxy's rows where it metered the trial, else the CLI's."""
        trial_ids = list(trial_ids)
        spent: dict[int, dict[str, Any]] = {}
        for chunk in range(0, len(trial_ids), 500):  # SQLite's bound-variable limit
            ids = trial_ids[chunk:chunk + 500]
            for row in self.db.query(
                    f"select trial_id, source, {', '.join(f'sum({c}) as {c}' for c in _TOKENS)}, "
                    "sum(cost_usd) as cost_usd, count(cost_usd) = count(*) as priced from usage "
                    f"where trial_id in ({','.join('?' * len(ids))}) and source in ('proxy', 'stdout') "
                    "group by trial_id, source order by source = 'proxy'", ids):
                spent[row["trial_id"]] = row  # ordered so that the proxy's rows win
        with immediate(self.db):
            for trial_id in trial_ids:
                fields: dict[str, Any] = {"status": status, "reason": reason}
                if (sums := spent.get(trial_id)) is not None:
                    fields.update({c: sums[c] for c in _TOKENS}, usage_source=sums["source"])
                    if sums["priced"]:  # a partial sum would pass for the whole bill
                        fields.update(cost_usd=sums["cost_usd"], cost_source="snapshot")
                self.db.table("trials").update(trial_id, fields)

    def configuration_ids(self, suite_id: str) -> dict[str, int]:
        """``{"model|cli": id}`` of a suite's configurations the store has."""
        return {r["key"]: r["id"] for r in self.db.query("select key, id from configurations where suite_id = ?",
                                                         [suite_id])}

    def trial_outcomes(self, suite_id: str) -> list[dict[str, Any]]:
        """``id, task_id, config_id, trial_index, status`` of every trial of a suite, oldest first."""
        return list(self.db.query("select id, task_id, config_id, trial_index, status from trials "
                                  "where suite_id = ? order by id", [suite_id]))

    def spend_by_model(self, suite_id: str) -> dict[str, tuple[float, int]]:
        """``{model: (USD, raw tokens)}`` over every trial of a suite the store has."""
        return {r["model"]: (r["usd"] or 0.0, r["tokens"] or 0) for r in self.db.query(
            "select model, sum(cost_usd) as usd, sum(coalesce(uncached_input, 0) + coalesce(cached_input, 0) + "
            "coalesce(cache_write, 0) + coalesce(output, 0) + coalesce(reasoning, 0)) as tokens "
            "from trials where suite_id = ? group by model", [suite_id])}

    def finished_costs(self, suite_id: str) -> list[dict[str, Any]]:
        """``task_id, model, cli, tier, status, usd, tokens, started_at, finished_at`` of a suite's trials
        that ended (in a final status), oldest first: what the forecast starts from."""
        return list(self.db.query(
            "select task_id, model, cli, tier, status, coalesce(cost_usd, 0) as usd, coalesce(uncached_input, 0) + "
            "coalesce(cached_input, 0) + coalesce(cache_write, 0) + coalesce(output, 0) + coalesce(reasoning, 0) "
            "as tokens, started_at, finished_at from trials where suite_id = ? and status in "
            "('passed', 'failed', 'killed', 'errored', 'infra-invalid') order by id", [suite_id]))

    def suite_paths(self) -> dict[str, str]:
        """``{suite id: the folder it was run from}`` of every suite the store has."""
        return {r["id"]: r["path"] for r in self.db.query("select id, path from suites order by created_at")}

    def cell_statuses(self, suite_id: str) -> Iterable[dict[str, Any]]:
        """``task_id, config_id, trial_index, status, reason`` of every trial of a suite."""
        return self.db.query("select task_id, config_id, trial_index, status, reason from trials where suite_id = ?",
                             [suite_id])

    def nodes(self, suite_id: str | None = None) -> list[dict[str, Any]]:
        """Per node a suite's trials were placed on (a Swarm fleet's, issue 28): ``node``,
        ``trials`` (every attempt), ``running`` (the slots it holds now) and ``infra_invalid``
        (attempts lost there, a lost node's among them). Trials of sandboxes without nodes have none."""
        sql = ("select node, count(*) as trials, sum(status = 'running') as running, "
               "sum(status = 'infra-invalid') as infra_invalid from trials where node is not null")
        params: list[Any] = []
        if suite_id is not None:
            sql += " and suite_id = ?"
            params.append(suite_id)
        return list(self.db.query(sql + " group by node order by node", params))


def trial_update(trial_id: int, fields: dict[str, Any]) -> tuple[str, list[Any]]:
    """The statement and parameters that set ``fields`` of trial ``trial_id``."""
    names = list(fields)
    return (f"update trials set {', '.join(f'{_quoted(name)} = ?' for name in names)} where id = ?",
            [*(fields[name] for name in names), trial_id])


def _quoted(name: str) -> str:
    """A column name in SQL: only our own code names the columns, never input."""
    if not name.isidentifier():
        raise ValueError(f"not a column name: {name!r}")
    return f'"{name}"'
