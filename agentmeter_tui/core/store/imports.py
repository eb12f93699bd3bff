"""Imported trials (Harbor jobs, ATIF files, CLI session stores): written in batches, each
batch one transaction with its trials, events and usage rows, so a store never holds an
imported trial without its transcript. ``import_key`` is unique: an item imported before is
left alone, which makes every import idempotent and lets a re-import add only what is new.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from ..rows import EventRow, UsageRow
from .group import Configurations, Queries
from .tx import immediate

if TYPE_CHECKING:
    from ..interop.trials import ImportedTrial
    from ..redact import Redactor
    from .lazydb import Database

EVENT_SQL = "insert into events (trial_id, seq, ts, kind, stream, text, data) values (?, ?, ?, ?, ?, ?, ?)"
USAGE_SQL = ("insert into usage (trial_id, seq, source, model, uncached_input, cached_input, cache_write, output, "
             "reasoning, cost_usd, reported_cost_usd, cache_write_1h) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


class ImportQueries(Queries):
    """``store.imports``; ``configurations``: where an imported trial's configuration row is found or made."""

    def __init__(self, db: Database, configurations: Configurations):
        super().__init__(db)
        self.configurations = configurations

    def import_keys(self, prefix: str) -> set[str]:
        """Keys of the items already imported whose key starts with ``prefix``."""
        return {r[0] for r in self.db.execute("select import_key from trials where import_key like ? escape '\\'",
                                              [prefix.replace("\\", "\\\\").replace("%", "\\%")
                                               .replace("_", "\\_") + "%"])}

    def add_imported(self, trials: Iterable[ImportedTrial]) -> list[int]:
        """Insert the trials not imported before, in one transaction; their new ids."""
        from ..redact import Redactor

        redactor = Redactor.for_run()  # an imported transcript may hold a key too: never stored
        ids: list[int] = []
        with immediate(self.db):
            known_suites = {r[0] for r in self.db.execute("select id from suites")}
            known_tasks: set[tuple[str, str]] = set()
            configs: dict[tuple[str, str, str], int] = {}
            for trial in trials:
                if self.db.execute("select 1 from trials where import_key = ?", [trial.key]).fetchone():
                    continue
                if trial.suite not in known_suites:
                    self.db.table("suites").insert({"id": trial.suite, "name": trial.suite, "own": trial.source,
                                              "created_at": trial.finished_at or trial.started_at,
                                              **({"seed_hash": trial.seed_hash} if trial.seed_hash else {})},
                                             ignore=True)
                    known_suites.add(trial.suite)
                if (trial.suite, trial.task) not in known_tasks:
                    self.db.table("tasks").insert({"suite_id": trial.suite, "task_id": trial.task, "tier": trial.tier,
                                             "position": 0}, pk=("suite_id", "task_id"), ignore=True)
                    known_tasks.add((trial.suite, trial.task))
                config_key = (trial.suite, trial.model, trial.cli)
                if config_key not in configs:
                    configs[config_key] = self.configurations.ensure_configuration(
                        trial.suite, trial.model, trial.cli, cli_version=trial.cli_version)
                ids.append(self._insert(trial, configs[config_key], redactor))
        return ids

    def _insert(self, trial: ImportedTrial, config_id: int, redactor: Redactor) -> int:
        index = trial.trial_index
        if index is None:  # the next free number in the cell
            index = self.db.execute("select coalesce(max(trial_index), -1) + 1 from trials where suite_id = ? and "
                                    "task_id = ? and config_id = ?", [trial.suite, trial.task, config_id]).fetchone()[0]
        row: dict[str, Any] = {
            "suite_id": trial.suite, "task_id": trial.task, "tier": trial.tier, "config_id": config_id,
            "model": trial.model, "cli": trial.cli, "trial_index": index, "attempt": trial.attempt, "status": trial.status,
            "reason": trial.reason, "passed": int(trial.passed), "quality": trial.quality, **trial.tokens.as_dict(),
            "turns": trial.turns, "tool_calls": trial.tool_calls, "cost_usd": trial.cost_usd,
            "cost_source": trial.cost_source, "cost_actual_usd": trial.cost_actual_usd,
            "cost_actual_source": trial.cost_actual_source,
            "flags": orjson.dumps(sorted(set(trial.flags))).decode() if trial.flags else None,
            "usage_source": trial.usage_source, "cli_version": trial.cli_version,
            "verifier_exit": trial.verifier_exit, "verifier_output": trial.verifier_output, "error": trial.error,
            "imported": 1, "source": trial.source, "import_key": trial.key,
            "extra": orjson.dumps(trial.extra).decode() if trial.extra else None,
            "started_at": trial.started_at, "finished_at": trial.finished_at,
        }
        events: list[EventRow] = []
        usage: list[UsageRow] = []
        for seq, event in enumerate(trial.events, start=1):
            data = orjson.dumps(event.meta) if event.meta else None
            events.append((None, seq, event.ts, str(event.kind), trial.source, event.text, data))
            if event.usage is not None:  # no 1-hour cache writes: an imported file does not tell them apart
                usage.append(UsageRow.of(None, seq, trial.source, event.model or trial.model, event.usage,
                                         event.cost_usd, None, None))
        events, redacted = redactor.rows(events)
        redacted += redactor.fields(row, ("reason", "verifier_output", "error", "extra"))
        if redacted:  # how many secrets were replaced, shown in review (core/redact.py)
            row["extra"] = orjson.dumps({**(orjson.loads(row["extra"]) if row["extra"] else {}),
                                         "redactions": redacted}).decode()
        trial_id = self.db.table("trials").insert(row).last_pk
        assert isinstance(trial_id, int)  # an insert into a rowid table gives its integer id
        events = [(trial_id, *e[1:]) for e in events]
        usage = [u._replace(trial_id=trial_id) for u in usage]
        self.db.conn.executemany(EVENT_SQL, events)
        if usage:
            self.db.conn.executemany(USAGE_SQL, usage)
        return trial_id

    def source_counts(self, suite_id: str, statuses: Iterable[str]) -> dict[str, int]:
        """How many trials of a suite in one of ``statuses`` came from each source (``agentmeter``:
        run here; ``record``: ``import-trials``)."""
        statuses = sorted(str(s) for s in statuses)
        rows = self.db.execute(
            "select coalesce(source, case when imported = 1 then 'record' else 'agentmeter' end), count(*) "
            f"from trials where suite_id = ? and status in ({','.join('?' * len(statuses))}) group by 1 order by 1",
            [suite_id, *statuses])
        return dict(rows.fetchall())
