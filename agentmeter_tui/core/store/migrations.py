"""Explicit, numbered schema migrations, applied in order when a store opens.

A migration is never edited once released: a new schema change is a new function appended to
``MIGRATIONS``. The ``_migrations`` table records which ones ran, so opening an old store
brings it forward and opening a current one does nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # light commands (score) import these without loading sqlite-utils
    import sqlite_utils

    from .lazydb import Database

from .search import create_index
from .tx import immediate

TOKEN_COLUMNS = {"uncached_input": int, "cached_input": int, "cache_write": int, "output": int, "reasoning": int}


def m001_initial(db: sqlite_utils.Database) -> None:
    db.table("suites").create(
        {"id": str, "seed_hash": str, "name": str, "version": str, "path": str, "own": str,
         "settings": str, "created_at": str},
        pk="id",
    )
    db.table("tasks").create(
        {"suite_id": str, "task_id": str, "tier": str, "instruction_hash": str, "verifier": str, "position": int},
        pk=("suite_id", "task_id"),
    )
    db.table("configurations").create(
        {"id": int, "suite_id": str, "key": str, "model": str, "provider": str, "price_key": str,
         "cli": str, "cli_version": str, "extra_args": str},
        pk="id",
    )
    db.table("configurations").create_index(["suite_id", "key"], unique=True)
    db.table("runs").create(
        {"id": int, "suite_id": str, "seed_hash": str, "status": str, "pid": int, "host": str,
         "socket": str, "started_at": str, "finished_at": str, "settings": str},
        pk="id",
    )
    db.table("trials").create(
        {"id": int, "run_id": int, "suite_id": str, "task_id": str, "tier": str, "config_id": int,
         "model": str, "cli": str, "trial_index": int, "attempt": int, "status": str, "reason": str,
         "passed": int, "quality": float, **TOKEN_COLUMNS, "turns": int, "tool_calls": int,
         "cost_usd": float, "cost_source": str, "cost_actual_usd": float, "cost_actual_source": str,
         "flags": str, "exit_code": int, "usage_source": str, "sandbox": str, "host": str, "pid": int,
         "proc_token": str, "cli_version": str, "workspace": str, "verifier_exit": int,
         "verifier_output": str, "error": str, "imported": int, "extra": str,
         "queued_at": str, "started_at": str, "finished_at": str},
        pk="id",
        not_null={"suite_id", "task_id", "model", "cli", "trial_index", "status"},
    )
    db.table("trials").create_index(["suite_id", "task_id", "config_id", "trial_index"])
    db.table("trials").create_index(["status"])
    # Events are the hot path: a rowid table with one covering index keeps batched inserts
    # near the raw SQLite floor while windowed reads by (trial, seq) stay index-only.
    db.table("events").create(
        {"trial_id": int, "seq": int, "ts": float, "kind": str, "stream": str, "text": str, "data": str},
    )
    db.table("events").create_index(["trial_id", "seq"], unique=True)
    db.table("usage").create(
        {"trial_id": int, "seq": int, "source": str, "model": str, **TOKEN_COLUMNS,
         "cost_usd": float, "reported_cost_usd": float},
    )
    db.table("usage").create_index(["trial_id", "seq"])
    db.table("scores").create(
        {"id": int, "trial_id": int, "score": int, "note": str, "reviewer": str, "created_at": str},
        pk="id",
        not_null={"trial_id", "score", "reviewer", "created_at"},
    )
    db.table("scores").create_index(["trial_id", "id"])
    db.table("notes").create(
        {"id": int, "trial_id": int, "text": str, "author": str, "created_at": str},
        pk="id",
    )
    db.table("audit").create(
        {"id": int, "ts": str, "actor": str, "action": str, "trial_id": int, "detail": str},
        pk="id",
    )


def m002_15_reviews(db: sqlite_utils.Database) -> None:
    """Several reviewers (issue 15): a score's role (a review or the adjudicator's final word), whether
    it was given blind, and per suite how many reviews a trial asks for and the disagreement that
    sends it to adjudication. Only adds; rows written before read as plain, sighted reviews."""
    db.table("scores").add_column("role", str)
    db.table("scores").add_column("blind", int)
    db.table("review_plans").create({"suite_id": str, "reviews": int, "disagreement": int, "updated_at": str},
                              pk="suite_id")


def m003_14_cache_write_1h(db: sqlite_utils.Database) -> None:
    """The 1-hour share of the cache writes (issue 14), per call and per trial, so a cost can be
    recomputed at a snapshot's cache_write_1h price."""
    for table in ("trials", "usage"):
        if "cache_write_1h" not in db.table(table).columns_dict:
            db.table(table).add_column("cache_write_1h", int)


def m004_13_import_source(db: sqlite_utils.Database) -> None:
    """Where an imported trial came from (issue 13): ``source`` (harbor, atif, session:CLI, record)
    and ``import_key``, unique per imported item so importing it again adds nothing. Native
    trials keep both NULL."""
    db.table("trials").add_column("source", str)
    db.table("trials").add_column("import_key", str)
    db.table("trials").create_index(["import_key"], unique=True, index_name="trials_import_key")


def m005_17_event_search(db: sqlite_utils.Database) -> None:
    """A trigram index over event texts for the review screen's search (issue 17), created empty:
    the rows already stored are indexed a chunk at a time afterwards (``search.index_events``), so
    opening an old store stays instant. Without FTS5's trigram tokenizer nothing is created and
    search stays the scan."""
    create_index(db)


def m006_28_trial_node(db: sqlite_utils.Database) -> None:
    """The node a trial ran on inside its host (issue 28: a Swarm fleet places each job on one of
    its nodes). NULL for sandboxes without nodes and for rows written before."""
    if "node" not in db.table("trials").columns_dict:
        db.table("trials").add_column("node", str)


def m007_35_triage_flags(db: sqlite_utils.Database) -> None:
    """Triage flags (issue 35): what each scanner found in a finished trial (its evidence: event
    seqs), which trials were scanned, and reviewers' verdicts on a flag (right or wrong),
    append-only: a verdict is never updated, a new one is another row."""
    db.table("flags").create({"id": int, "trial_id": int, "scanner": str, "evidence": str, "why": str, "created_at": str},
                       pk="id", not_null={"trial_id", "scanner", "created_at"})
    db.table("flags").create_index(["trial_id", "scanner"], unique=True)
    db.table("flags").create_index(["scanner"])
    db.table("flag_scans").create({"trial_id": int, "scanners": str, "scanned_at": str}, pk="trial_id")
    db.table("flag_verdicts").create({"id": int, "flag_id": int, "verdict": str, "reviewer": str, "note": str,
                                "created_at": str}, pk="id", not_null={"flag_id", "verdict", "reviewer", "created_at"})
    db.table("flag_verdicts").create_index(["flag_id", "id"])


def m008_35_regrades(db: sqlite_utils.Database) -> None:
    """Regrades (issue 35): each new verdict a task's current verifier gave on a trial's kept final
    workspace, with its time and the verifier's hash, append-only (the trial's own verdict stays in
    ``trials``; reports count the latest); ``trials.kept``: where that workspace was kept (a folder
    name under the store's ``<db>.kept/``), NULL when it was not."""
    db.table("regrades").create({"id": int, "trial_id": int, "status": str, "passed": int, "quality": float,
                           "reason": str, "verifier_exit": int, "verifier_output": str, "verifier_hash": str,
                           "sandbox": str, "created_at": str},
                          pk="id", not_null={"trial_id", "status", "verifier_hash", "created_at"})
    db.table("regrades").create_index(["trial_id", "id"])
    if "kept" not in db.table("trials").columns_dict:
        db.table("trials").add_column("kept", str)


def m009_34_suite_sources(db: sqlite_utils.Database) -> None:
    """Where a suite came from (issue 34): the suite.toml text a command line implied (so
    ``suite show`` prints it and the run is reproducible), and per task of a dataset run its
    dataset, version, git URL, commit, path and the hash of the fetched folder."""
    db.table("suite_files").create({"suite_id": str, "toml": str, "command": str, "created_at": str}, pk="suite_id")
    db.table("task_sources").create({"suite_id": str, "task_id": str, "dataset": str, "version": str, "git_url": str,
                               "commit_id": str, "path": str, "tree_hash": str, "recorded_at": str},
                              pk=("suite_id", "task_id"), not_null={"suite_id", "task_id", "commit_id"})
    db.table("task_sources").create_index(["git_url", "commit_id", "path"])


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [m001_initial, m002_15_reviews, m003_14_cache_write_1h,
                                                           m004_13_import_source, m005_17_event_search,
                                                           m006_28_trial_node, m007_35_triage_flags,
                                                           m008_35_regrades, m009_34_suite_sources]


def is_current(conn: sqlite3.Connection) -> bool:
    """Whether every migration has run on the store behind ``conn`` (plain SQL: the check on
    every open, and light commands, need no sqlite-utils)."""
    try:
        done = {name for (name,) in conn.execute("select name from _migrations")}
    except sqlite3.OperationalError:  # no _migrations table: a new or foreign file
        return False
    return all(m.__name__ in done for m in MIGRATIONS)


def migrate(db: Database) -> list[str]:
    """Apply pending migrations in one immediate transaction; return the names applied.

    Two processes opening a new store at once (a runner and a viewer) must not both migrate:
    the first takes the write lock, the second waits and then finds nothing to do.
    """
    applied: list[str] = []
    if is_current(db.conn):
        return applied  # the common case, without taking the write lock (nor loading sqlite-utils)
    with immediate(db):
        tables = db.full()  # migrations make tables: sqlite-utils from here on
        if "_migrations" not in tables.table_names():
            tables.table("_migrations").create({"name": str, "applied_at": str}, pk="name")
        done = {row["name"] for row in tables.table("_migrations").rows}
        for migration in MIGRATIONS:
            name = migration.__name__
            if name in done:
                continue
            migration(tables)
            tables.table("_migrations").insert({"name": name, "applied_at": datetime.now(UTC).isoformat()})
            applied.append(name)
    return applied
