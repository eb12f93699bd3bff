"""Trial records: the portable, one-object-per-line form of a finished trial.

``agentmeter export-trials`` writes them and ``agentmeter import-trials`` reads them, so
results produced elsewhere can be reviewed and reported. The format is documented in
``docs/trial-record.md``; fields beyond the documented ones are kept on import (``extra``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from ... import __version__
from ..inert import inert_json_bytes
from ..usage import TOKEN_CLASSES, TokenUsage, count_problem
from ..vocab import TIERS, TrialStatus

STATUSES = {s.value for s in TrialStatus if s.is_final}


@dataclass(slots=True)
class TrialRecord:
    suite: str
    task: str
    tier: str | None
    model: str
    cli: str
    trial: int
    status: str
    passed: bool
    quality: float
    tokens: TokenUsage
    cost_usd: float | None
    cost_source: str | None
    turns: int
    tool_calls: int
    started_at: str | None
    finished_at: str | None
    extra: dict[str, Any] = field(default_factory=dict)
    id: int | None = None  # store id, when the record came from a store

    @property
    def config(self) -> tuple[str, str]:
        return (self.model, self.cli)

    def to_json(self) -> dict[str, Any]:
        out = {
            "suite": self.suite, "task": self.task, "tier": self.tier, "model": self.model, "cli": self.cli,
            "trial": self.trial, "status": self.status, "passed": self.passed, "quality": self.quality,
            "tokens": self.tokens.as_dict(), "cost_usd": self.cost_usd, "cost_source": self.cost_source,
            "turns": self.turns, "tool_calls": self.tool_calls, "started_at": self.started_at,
            "finished_at": self.finished_at,
        }
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_trial_row(cls, row: dict) -> TrialRecord:
        extra: dict[str, Any] = {}
        for key in ("reason", "attempt", "cost_actual_usd", "cost_actual_source", "exit_code", "usage_source"):
            if row.get(key) is not None:
                extra[key] = row[key]
        if row.get("flags"):
            extra["flags"] = orjson.loads(row["flags"])
        if row.get("extra"):
            extra.update(orjson.loads(row["extra"]))
        if row.get("regraded_at"):  # the verdict is a regrade's (store/reports.py): the original goes along
            extra["regrade"] = {"at": row["regraded_at"], "verifier_hash": row["regrade_verifier_hash"],
                                "original": {k: row[f"original_{k}"] for k in ("status", "passed", "quality", "reason")}}
        return cls(
            suite=row["suite_id"], task=row["task_id"], tier=row.get("tier"), model=row["model"],
            cli=row["cli"], trial=row["trial_index"], status=row["status"], passed=bool(row.get("passed")),
            quality=float(row["quality"] or 0.0),
            tokens=TokenUsage(*(int(row.get(c) or 0) for c in TOKEN_CLASSES)),
            cost_usd=row.get("cost_usd"), cost_source=row.get("cost_source"), turns=int(row.get("turns") or 0),
            tool_calls=int(row.get("tool_calls") or 0), started_at=row.get("started_at"),
            finished_at=row.get("finished_at"), extra=extra, id=row.get("id"),
        )


EXPORTED_BY = "exported_by"  # written on export, not kept on import (the importing store is not that tool)
SEED_HASH = "seed_prompt_hash"  # the suite's, written on export: a record joins only a suite of that hash


class RecordError(ValueError):
    """A malformed trial record, with the file, line and field that are wrong."""

    def __init__(self, source: str, line: int, field_name: str, message: str):
        self.source, self.line, self.field = source, line, field_name
        super().__init__(f"{source}:{line}: field '{field_name}': {message}")


_REQUIRED: dict[str, tuple[type, ...]] = {
    "suite": (str,), "task": (str,), "model": (str,), "cli": (str,), "trial": (int,), "status": (str,),
    "passed": (bool,), "quality": (int, float), "tokens": (dict,), "turns": (int,), "tool_calls": (int,),
}
_NULLABLE: dict[str, tuple[type, ...]] = {
    "tier": (str,), "cost_usd": (int, float), "cost_source": (str,), "started_at": (str,), "finished_at": (str,),
}


def parse_record(obj: Any, source: str = "<input>", line: int = 1) -> TrialRecord:
    if not isinstance(obj, dict):
        raise RecordError(source, line, "<record>", "expected a JSON object")
    for name, types in _REQUIRED.items():
        if name not in obj:
            raise RecordError(source, line, name, "missing")
        value = obj[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise RecordError(source, line, name, f"expected {types[0].__name__}, got {type(value).__name__}")
    for name, types in _NULLABLE.items():
        value = obj.get(name)
        if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            raise RecordError(source, line, name, f"expected {types[0].__name__} or null")
    if obj.get("tier") not in (None, *TIERS):
        raise RecordError(source, line, "tier", f"must be one of {', '.join(TIERS)} or null")
    if obj["status"] not in STATUSES:
        raise RecordError(source, line, "status", f"must be one of {', '.join(sorted(STATUSES))}")
    if obj.get("cost_source") not in (None, "snapshot", "reported"):
        raise RecordError(source, line, "cost_source", "must be 'snapshot', 'reported' or null")
    for name in ("trial", "turns", "tool_calls"):
        if count_problem(name, obj[name]):
            raise RecordError(source, line, name, "expected a non-negative integer below 2**63")
    if obj.get("cost_usd") is not None and not math.isfinite(obj["cost_usd"]):
        raise RecordError(source, line, "cost_usd", "expected a finite number")
    tokens = obj["tokens"]
    for name in TOKEN_CLASSES:
        if count_problem(name, tokens.get(name, 0)):
            raise RecordError(source, line, f"tokens.{name}", "expected a non-negative integer below 2**63")
    unknown = set(tokens) - set(TOKEN_CLASSES)
    if unknown:
        raise RecordError(source, line, f"tokens.{sorted(unknown)[0]}", "unknown token class")
    quality = float(obj["quality"])
    if not 0.0 <= quality <= 1.0:
        raise RecordError(source, line, "quality", "must be within [0, 1]")
    known = set(_REQUIRED) | set(_NULLABLE)
    return TrialRecord(
        suite=obj["suite"], task=obj["task"], tier=obj.get("tier"), model=obj["model"], cli=obj["cli"],
        trial=obj["trial"], status=obj["status"], passed=obj["passed"], quality=quality,
        tokens=TokenUsage.from_dict(tokens), cost_usd=obj.get("cost_usd"), cost_source=obj.get("cost_source"),
        turns=obj["turns"], tool_calls=obj["tool_calls"], started_at=obj.get("started_at"),
        finished_at=obj.get("finished_at"), extra={k: v for k, v in obj.items() if k not in known | {EXPORTED_BY}},
    )


def read_records(stream: IO[bytes] | IO[str], source: str) -> Iterator[TrialRecord]:
    """Every record; the first bad line raises its :class:`RecordError`."""
    for item in read_records_each(stream, source):
        if isinstance(item, RecordError):
            raise item
        yield item[1]


def read_records_each(stream: Iterable[bytes | str],
                      source: str) -> Iterator[tuple[str, TrialRecord, int] | RecordError]:
    """Each line as ``(import key, record, line number)``, or the :class:`RecordError` naming
    what is wrong with it (the rest are still read). The key is the record's identity: the hash
    of its content without ``exported_by``, so the same record twice (in one file, in two files,
    exported by two versions) is one trial, and the same file imported twice adds nothing."""
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            yield RecordError(source, number, "<record>", f"not valid JSON ({exc})")
            continue
        try:
            record = parse_record(obj, source, number)
        except RecordError as exc:
            yield exc
            continue
        if obj.get(SEED_HASH) is not None and not isinstance(obj[SEED_HASH], str):
            yield RecordError(source, number, SEED_HASH, "expected a string or null")
            continue
        content = {k: v for k, v in obj.items() if k != EXPORTED_BY}
        digest = hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()
        yield f"record:{digest}", record, number


def foreign_records(store: Any, items: list[tuple[str, TrialRecord, int]], source: str) -> list[RecordError]:
    """The records that claim a suite of this store under another seed-prompt hash (or none):
    they are not that suite's results (its instructions differ, or nobody can tell), and would
    change its table; each is named, and left out by the caller."""
    hashes: dict[str, str | None] = {}
    errors = []
    for _key, record, line in items:
        if record.suite not in hashes:
            row = store.suite_row(record.suite)
            hashes[record.suite] = row.get("seed_hash") if row else None
        want, claimed = hashes[record.suite], record.extra.get(SEED_HASH)
        if want is not None and claimed != want:
            said = f"'{claimed}'" if claimed else "none"
            errors.append(RecordError(source, line, SEED_HASH,
                                      f"suite '{record.suite}' in this store has seed-prompt hash '{want}', "
                                      f"the record {said}: not imported"))
    return errors


def write_records(records: Iterable[TrialRecord], stream: IO[bytes]) -> int:
    count = 0
    for record in records:
        obj = record.to_json()
        obj[EXPORTED_BY] = f"agentmeter-tui {__version__}"  # which version wrote it, on every line
        stream.write(inert_json_bytes(orjson.dumps(obj)) + b"\n")  # safe to cat to a terminal
        count += 1
    return count


def load_records(path: str | Path) -> list[TrialRecord]:
    with open(path, "rb") as handle:
        return list(read_records(handle, str(path)))


def records_from_store(store: Any, suite_id: str | None = None) -> list[TrialRecord]:
    """Every final trial of a suite (the latest suite when ``suite_id`` is None) as records.

    A trial that was retried after an infra failure appears once per attempt: the reports
    count every attempt in cost, and pick the countable one per (task, configuration, trial).
    """
    if suite_id is None:
        row = store.suite_row()
        if row is None:
            return []
        suite_id = row["id"]
    seed_hash = (store.suite_row(suite_id) or {}).get("seed_hash")
    records = [TrialRecord.from_trial_row(r) for r in store.reports.final_trial_rows(suite_id, STATUSES)]
    for record in records:
        if seed_hash is not None:
            record.extra.setdefault(SEED_HASH, seed_hash)
    return records


def import_records(store: Any, records: list[TrialRecord], keys: list[str] | None = None) -> int:
    """Insert records as imported trials, in one transaction: all of them or none. With
    ``keys`` (one per record, :func:`read_records_each`), a record imported before is left out."""
    if not records:
        return 0
    created = records[0].finished_at or records[0].started_at
    suites = {suite_id: created for suite_id in sorted({r.suite for r in records})}
    seed_hashes = {r.suite: r.extra[SEED_HASH] for r in records if r.extra.get(SEED_HASH)}
    from ..redact import Redactor

    redactor = Redactor.for_run()  # a record's reason or extras may quote a key: never stored
    tasks = {(r.suite, r.task): r.tier for r in records}
    rows = []
    for n, record in enumerate(records):
        tokens = record.tokens.as_dict()
        extra = dict(record.extra)
        rows.append(((record.suite, record.model, record.cli), {
            "suite_id": record.suite, "task_id": record.task, "tier": record.tier,
            "model": record.model, "cli": record.cli,
            "trial_index": record.trial, "attempt": int(extra.pop("attempt", 0) or 0),
            "status": record.status, "reason": extra.pop("reason", None), "passed": int(record.passed),
            "quality": record.quality, **tokens, "turns": record.turns, "tool_calls": record.tool_calls,
            "cost_usd": record.cost_usd, "cost_source": record.cost_source,
            "cost_actual_usd": extra.pop("cost_actual_usd", None),
            "cost_actual_source": extra.pop("cost_actual_source", None),
            "flags": orjson.dumps(extra.pop("flags")).decode() if "flags" in extra else None,
            "started_at": record.started_at, "finished_at": record.finished_at, "imported": 1,
            **({"import_key": keys[n], "source": "record"} if keys else {}),
            "extra": orjson.dumps(extra).decode() if extra else None,
        }))
        redactor.fields(rows[-1][1], ("reason", "extra"))
    return store.reports.import_trials(suites, [(s, t, tier) for (s, t), tier in sorted(tasks.items())], rows,
                               seed_hashes=seed_hashes)
