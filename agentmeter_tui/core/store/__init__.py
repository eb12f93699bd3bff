"""The SQLite store: one file per project, WAL, migrations on open.

Every query and transaction of the project is a named method here. :class:`Store` is one facade:
it opens the store and holds the suite, trial and event basics every caller shares, and composes
one query object per concept, each made with the connection and only what else it needs:
``store.reviews`` (scores, notes, reviewers, compare's steps), ``store.runs`` (the run engine),
``store.views`` (the screens and doctor), ``store.search`` (the review screen's search and its
index), ``store.reports`` (reports and trial records), ``store.imports`` (trials imported from
elsewhere), ``store.flags`` (triage flags), ``store.regrades`` and ``store.sources`` (where a
suite came from). Nothing outside this package writes SQL or touches the connection.

Writers: the runner process owns trial and event writes (through :class:`StoreWriter`, in
``writer``, the single writer thread); reviewers' scores and notes are short append-only
transactions from whichever client makes them. WAL plus a busy timeout lets those coexist
without a second long-lived writer.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..paths import DEFAULT_DB, owner_only
from .check import StoreError, check_file, damage, opened
from .flags import FlagQueries
from .imports import ImportQueries
from .lazydb import Database
from .migrations import migrate
from .regrades import RegradeQueries
from .reports import ReportQueries
from .reviews import ReviewQueries
from .runs import RunQueries
from .scores import ScoreRow
from .search import SearchQueries
from .sources import SourceQueries
from .tx import immediate, utcnow
from .views import ViewQueries

__all__ = ["DEFAULT_DB", "ScoreRow", "SeedHashChanged", "Store", "StoreError", "connect", "sha256_text",
           "utcnow"]



def connect(path: str | Path, *, readonly: bool = False) -> Database:
    """A connection to the store at ``path``; ``readonly`` on a store this process cannot write
    (a read-only file, folder or mount) opens it as SQLite's read-only, else immutable, file."""
    path = Path(path)
    if readonly and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        return _read_only(path)
    owner_only(path)  # SQLite gives the WAL and shm files the database file's mode
    conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
    db = Database(conn)
    conn.execute("PRAGMA journal_mode=WAL")  # a new connection is in no transaction yet
    for suffix in ("-wal", "-shm"):  # made by an older version, before the store was owner-only
        owner_only(path.with_name(path.name + suffix), create=False)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return db


def _read_only(path: Path) -> Database:
    uri = f"file:{quote(str(path.resolve()))}"
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30, check_same_thread=False)
        conn.execute("select count(*) from sqlite_master").fetchone()
    except sqlite3.OperationalError:
        # A WAL store in a folder we cannot write has no shm file to share: nobody can be
        # writing it either, so it is read as an immutable file.
        conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=30, check_same_thread=False)
    return Database(conn)


class SeedHashChanged(Exception):
    """A suite id already holds results produced from different task instructions."""

    def __init__(self, suite_id: str, changed: list[str], added: list[str], removed: list[str]):
        self.suite_id, self.changed, self.added, self.removed = suite_id, changed, added, removed
        parts = []
        if changed:
            parts.append("changed: " + ", ".join(changed))
        if added:
            parts.append("added: " + ", ".join(added))
        if removed:
            parts.append("removed: " + ", ".join(removed))
        super().__init__(
            f"suite '{suite_id}' already has results under a different seed-prompt hash "
            f"({'; '.join(parts) or 'task order changed'}); give the suite a new id or version "
            "instead of appending to the old results"
        )


class Store:
    """Typed access to the store. Cheap to open; every logical write is one transaction."""

    def __init__(self, path: str | Path = DEFAULT_DB, *, readonly: bool = False, check: bool = True):
        """Open (a missing store is created unless ``readonly``). A path that cannot be a store,
        a damaged one (checked when writing) or a read-only one opened to write raises
        :class:`StoreError`, one line naming the file; ``check=False`` skips the damage scan."""
        self.path = Path(path)
        check_file(self.path, create=not readonly, write=not readonly)
        try:
            self.db: Database = connect(self.path, readonly=readonly)
            opened(self.path)
            if not readonly:
                if check and (found := damage(self.db.conn)):
                    self.db.conn.close()
                    raise StoreError(self.path, f"damaged, not written to ({found})")
                migrate(self.db)
            else:
                self.db.execute("select count(*) from sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(self.path, f"not a readable agentmeter store ({exc})") from None
        self.reviews = ReviewQueries(self.db)
        self.runs = RunQueries(self.db)
        self.views = ViewQueries(self.db)
        self.search = SearchQueries(self.db)
        self.flags = FlagQueries(self.db)
        self.regrades = RegradeQueries(self.db)
        self.sources = SourceQueries(self.db)
        self.reports = ReportQueries(self.db, self.regrades, self)  # the Store: its configuration rows
        self.imports = ImportQueries(self.db, self)

    @classmethod
    def for_reading(cls, path: str | Path) -> Store:
        """A store a command only reads: brought up to date when this process may write it,
        else opened read-only (a read-only file, folder or mount reads as well)."""
        path = Path(path)
        check_file(path, create=False, write=False)  # reading never makes a store
        if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
            return cls(path, check=False)
        return cls(path, readonly=True)

    def close(self) -> None:
        self.db.conn.close()

    # -- suites -----------------------------------------------------------------------------

    def check_suite(self, suite_id: str, seed_hash: str, task_hashes: dict[str, str]) -> None:
        """Raise :class:`SeedHashChanged` if ``suite_id`` holds results of other instructions."""
        if "suites" not in self.db.table_names():
            return
        row = next(self.db.query("select seed_hash from suites where id = ?", [suite_id]), None)
        if row is None or row["seed_hash"] in (None, seed_hash):
            return
        old = {r["task_id"]: r["instruction_hash"]
               for r in self.db.query("select task_id, instruction_hash from tasks where suite_id = ?", [suite_id])}
        changed = sorted(t for t in task_hashes if t in old and old[t] != task_hashes[t])
        added = sorted(set(task_hashes) - set(old))
        removed = sorted(set(old) - set(task_hashes))
        raise SeedHashChanged(suite_id, changed, added, removed)

    def register_suite(self, suite: Any) -> None:
        """Record a loaded suite, its tasks and configurations (idempotent)."""
        task_hashes = {t.id: t.instruction_hash for t in suite.tasks}
        self.check_suite(suite.id, suite.seed_hash, task_hashes)
        with immediate(self.db):
            self.db["suites"].upsert(
                {"id": suite.id, "seed_hash": suite.seed_hash, "name": suite.name, "version": suite.version,
                 "path": str(suite.path), "own": suite.own, "created_at": utcnow()},
                pk="id",
            )
            for position, task in enumerate(suite.tasks):
                self.db["tasks"].upsert(
                    {"suite_id": suite.id, "task_id": task.id, "tier": task.tier,
                     "instruction_hash": task.instruction_hash, "verifier": task.verifier.kind,
                     "position": position},
                    pk=("suite_id", "task_id"),
                )
            for config in suite.configurations():
                self.ensure_configuration(suite.id, config.model.id, config.cli.label, config.model.provider,
                                          config.model.price_key, config.cli.version, config.cli.args)

    def ensure_configuration(self, suite_id: str, model: str, cli: str, provider: str | None = None,
                             price_key: str | None = None, cli_version: str | None = None,
                             extra_args: list[str] | None = None) -> int:
        key = f"{model}|{cli}"
        row = next(self.db.query("select id from configurations where suite_id = ? and key = ?",
                                 [suite_id, key]), None)
        if row:
            return row["id"]
        return self.db["configurations"].insert(
            {"suite_id": suite_id, "key": key, "model": model, "provider": provider, "price_key": price_key,
             "cli": cli, "cli_version": cli_version, "extra_args": json.dumps(extra_args or [])}
        ).last_pk

    def suite_ids(self) -> list[str]:
        return [r["id"] for r in self.db.query("select id from suites order by created_at")]

    def suite_row(self, suite_id: str | None = None) -> dict | None:
        if suite_id is None:
            return next(self.db.query("select * from suites order by created_at desc limit 1"), None)
        return next(self.db.query("select * from suites where id = ?", [suite_id]), None)

    # -- trials -----------------------------------------------------------------------------

    def trial(self, trial_id: int) -> dict | None:
        return next(self.db.query("select * from trials where id = ?", [trial_id]), None)

    def trials(self, suite_id: str | None = None, where: str = "", params: Iterable = ()) -> list[dict]:
        sql = "select * from trials"
        clauses, args = [], []
        if suite_id is not None:
            clauses.append("suite_id = ?")
            args.append(suite_id)
        if where:
            clauses.append(where)
            args.extend(params)
        if clauses:
            sql += " where " + " and ".join(clauses)
        return list(self.db.query(sql + " order by id", args))

    # -- events -----------------------------------------------------------------------------

    def event_count(self, trial_id: int) -> int:
        return self.db.execute("select count(*) from events where trial_id = ?", [trial_id]).fetchone()[0]

    def events(self, trial_id: int, start: int = 0, limit: int = -1) -> Iterator[tuple]:
        """Rows ``(seq, ts, kind, stream, text, data)`` from ``start`` in sequence order."""
        cursor = self.db.execute(
            "select seq, ts, kind, stream, text, data from events where trial_id = ? and seq >= ? "
            "order by seq limit ?", [trial_id, start, limit])
        yield from cursor

    def events_of(self, trial_ids: Sequence[int]) -> Iterator[tuple[int, list[tuple]]]:
        """``(trial_id, rows)`` for each of ``trial_ids`` that has events, in id order, rows as
        :meth:`events` gives them: one streamed query for many trials (a site reads thousands)."""
        marks = ", ".join("?" * len(trial_ids))
        cursor = self.db.execute(f"select trial_id, seq, ts, kind, stream, text, data from events "
                                 f"where trial_id in ({marks}) order by trial_id, seq", list(trial_ids))
        for trial_id, rows in groupby(cursor, itemgetter(0)):
            yield trial_id, [row[1:] for row in rows]

    def usage_by_seq(self, trial_id: int) -> dict[int, dict]:
        """The trial's usage rows by event seq: the meter's rows only (the proxy's when it
        metered the trial; the CLI's own figures beside them would count the calls twice)."""
        return self.usage_of([trial_id]).get(trial_id, {})

    def usage_of(self, trial_ids: Sequence[int]) -> dict[int, dict[int, dict]]:
        """:meth:`usage_by_seq` of each of ``trial_ids`` that has usage rows, in one query."""
        marks = ", ".join("?" * len(trial_ids))
        found: dict[int, dict[int, dict]] = {}
        rows = self.db.query(f"select * from usage where trial_id in ({marks}) order by trial_id, seq",
                             list(trial_ids))
        for trial_id, group in groupby(rows, itemgetter("trial_id")):
            own = list(group)
            metered = "proxy" if any(r["source"] == "proxy" for r in own) else None
            found[trial_id] = {r["seq"]: r for r in own if metered is None or r["source"] == metered}
        return found


def sha256_text(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()
