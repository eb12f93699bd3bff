"""What every importer produces: trials with their transcripts, and the items it skipped.

An importer never stops at a bad item: it names the file (and line) in a :class:`Skipped`,
goes on with the rest, and the command exits non-zero with the count at the end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ..pricing import PriceSnapshot
from ..usage import TOKEN_CLASSES, TokenUsage, count_problem
from .atif_read import ImportedEvent

UTF8_LINE_LIMIT = 8 * 1024 * 1024  # a longer line in a session file is refused, not read into memory


@dataclass(slots=True)
class ImportedTrial:
    """One finished run from elsewhere, ready for the store (``store.imports.add_imported``)."""

    source: str  # "harbor", "atif", "session:claude-code", ...
    key: str  # unique per item: importing it again adds nothing
    suite: str
    task: str
    model: str
    cli: str
    status: str
    passed: bool = False
    quality: float = 0.0
    tokens: TokenUsage = field(default_factory=TokenUsage)
    turns: int = 0
    tool_calls: int = 0
    cost_usd: float | None = None  # comparable: from a price snapshot
    cost_source: str | None = None
    cost_actual_usd: float | None = None  # what the source says was spent
    cost_actual_source: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    reason: str | None = None
    error: str | None = None
    verifier_output: str | None = None
    verifier_exit: int | None = None
    cli_version: str | None = None
    usage_source: str | None = None
    tier: str | None = None
    trial_index: int | None = None  # kept when the source numbers its trials (our own ATIF files)
    attempt: int = 0
    priced: bool = False  # the source already says the comparable cost (our own files): keep it
    seed_hash: str | None = None  # the suite's seed-prompt hash, when the source carries it (our export)
    flags: list[str] = field(default_factory=list)
    events: list[ImportedEvent] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    origin: str = ""  # the file it was read from, to name it when it is skipped

    def problem(self) -> str | None:
        """Why the store cannot take this trial as read (a count past 2**63 - 1 or negative, a
        cost that is not a number), naming the field; None when it can. Sums of counts each
        within range can overflow too, so the totals and every call are checked here."""
        for name in TOKEN_CLASSES:
            if why := count_problem(f"tokens.{name}", getattr(self.tokens, name)):
                return why
        for seq, event in enumerate(self.events, start=1):
            for name in TOKEN_CLASSES if event.usage is not None else ():
                if why := count_problem(f"event {seq} usage.{name}", getattr(event.usage, name)):
                    return why
            if event.cost_usd is not None and not math.isfinite(event.cost_usd):
                return f"field 'event {seq} cost_usd': {event.cost_usd} is not a number"
        for name in ("turns", "tool_calls", "attempt"):
            if why := count_problem(name, getattr(self, name)):
                return why
        if self.trial_index is not None and (why := count_problem("trial_index", self.trial_index)):
            return why
        for name in ("cost_usd", "cost_actual_usd", "quality"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
                return f"field '{name}': {value!r} is not a number"
        return None

    def count_events(self) -> None:
        """Turns and tool calls from the transcript, where the source gave no totals."""
        if not self.turns:
            self.turns = sum(1 for e in self.events if e.usage is not None)
        if not self.tool_calls:
            self.tool_calls = sum(1 for e in self.events if e.kind == "tool_call")

    def price(self, prices: PriceSnapshot | None, label: str) -> None:
        """The comparable cost at ``prices``: per call when the model's price has long-context
        tiers (each call's prompt picks its tier), else of the totals; unpriced (None, flagged)
        when the model has no entry. No tokens cost nothing at any price (the oracle)."""
        if not self.tokens:
            self.cost_usd, self.cost_source = 0.0, label
            return
        if prices is None or (found := prices.find(self.model)) is None:
            if prices is not None:
                self.flags.append("unpriced")
            return
        calls = [e.usage for e in self.events if e.usage is not None] if found[1].tiers else []
        if not calls or sum(calls, TokenUsage()) != self.tokens:
            calls = [self.tokens]  # no tiers, or the transcript misses calls the totals count
        total = Decimal(0)
        for usage in calls:
            prompt = usage.uncached_input + usage.cached_input + usage.cache_write if len(calls) > 1 else None
            total += prices.cost_usd(self.model, usage, call_input=prompt) or Decimal(0)
        self.cost_usd, self.cost_source = float(total), label


@dataclass(slots=True)
class Skipped:
    where: str  # file, and ":line" when there is one
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.why}"


@dataclass
class ImportOutcome:
    added: int = 0
    already: int = 0  # imported before: nothing added
    unfinished: int = 0  # still running at the source: left for a later import
    skipped: list[Skipped] = field(default_factory=list)
    suites: set[str] = field(default_factory=set)  # the suites the trials read went to

    def summary(self, what: str) -> str:
        parts = [f"imported {self.added} {what}"]
        if self.already:
            parts.append(f"{self.already} already in the store")
        if self.unfinished:
            parts.append(f"{self.unfinished} not finished yet")
        if self.skipped:
            parts.append(f"skipped {len(self.skipped)} bad item(s)")
        return ", ".join(parts)


class Pricer:
    """Comparable costs for imported trials: a given snapshot file, else one drafted from the
    bundled genai-prices data as of today for each model met (never from the network)."""

    def __init__(self, snapshot: PriceSnapshot | None = None):
        self.snapshot = snapshot
        self.label = f"snapshot {snapshot.path.name} sha256:{snapshot.sha256[:12]}" if snapshot and snapshot.path \
            and snapshot.sha256 else None
        self._drafted: dict[str, PriceSnapshot | None] = {}

    def for_model(self, model: str) -> tuple[PriceSnapshot | None, str | None]:
        if self.snapshot is not None:
            return self.snapshot, self.label
        if model not in self._drafted:
            self._drafted[model] = _draft(model)
        drafted = self._drafted[model]
        return drafted, None if drafted is None else f"genai-prices as of {drafted.spec.as_of}"

    def price(self, trial: ImportedTrial) -> None:
        snapshot, label = self.for_model(trial.model)
        if snapshot is None and trial.tokens:
            trial.flags.append("unpriced")
            return
        trial.price(snapshot, "snapshot")
        if trial.cost_usd is not None:
            trial.extra["price_snapshot"] = label


def _draft(model: str) -> PriceSnapshot | None:
    import tomllib

    from ..pricing import SnapshotFile, draft_snapshot, now_utc

    if not model or model in ("none", "unknown"):
        return None
    text, missing = draft_snapshot([model], now_utc())
    if missing:
        return None
    return PriceSnapshot(SnapshotFile.model_validate(tomllib.loads(text)))


def store_all(store: Any, items: Iterable[ImportedTrial | Skipped | str | None], pricer: Pricer | None = None,
              batch: int = 500) -> ImportOutcome:
    """Write what an importer yields, ``batch`` trials per transaction; count the rest.

    A batch is written on a second thread while the next one is read: SQLite lets go of the
    GIL while it inserts, so reading and writing overlap on two cores. One batch at a time
    touches the store (the next waits for the previous one)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    outcome = ImportOutcome()
    pending: list[ImportedTrial] = []
    writing: Future | None = None

    def write(trials: list[ImportedTrial]) -> int:
        return len(store.imports.add_imported(trials))  # a key imported meanwhile is skipped there

    def count(trials: list[ImportedTrial], added: int) -> None:  # on this thread only
        outcome.added += added
        outcome.already += len(trials) - added

    written: list[ImportedTrial] = []

    with ThreadPoolExecutor(1, thread_name_prefix="import-writer") as writer:
        for item in items:
            if item is None:
                outcome.unfinished += 1
            elif isinstance(item, str):
                outcome.already += 1
            elif isinstance(item, Skipped):
                outcome.skipped.append(item)
            elif (why := item.problem()) is not None:
                outcome.skipped.append(Skipped(item.origin or item.key, why))
            else:
                outcome.suites.add(item.suite)
                if pricer is not None and not item.priced and item.cost_usd is None:
                    pricer.price(item)
                pending.append(item)
                if len(pending) >= batch:
                    if writing is not None:
                        count(written, writing.result())
                    writing, written, pending = writer.submit(write, pending), pending, []
        if writing is not None:
            count(written, writing.result())
        if pending:
            count(pending, write(pending))
    if outcome.added:  # at the ingest's end, the triage flags of what came in (scanners/scan.py)
        from ..scanners.scan import scan_store

        for suite in sorted(outcome.suites):
            scan_store(store, suite)
    return outcome
