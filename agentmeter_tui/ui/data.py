"""Provides the UI's access to the store: one thread that owns a connection, and the data the
screens need, shaped from the store's named queries (``core.store.views``).

The runner writes trials and events; the UI reads them (WAL lets it read while the runner
writes) and writes only scores and notes, each a short transaction through ``Store``. All of
it runs on one worker thread (:class:`StoreThread`) so the event loop never waits on SQLite
and the connection never crosses threads. The functions here take a ``Store`` and return
plain data, so they are tested without an app.
"""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from ..core.inert import inert
from ..core.run.control import LIVE_TEXT
from ..core.store import Store
from ..core.vocab import REVIEWABLE_STATUSES

if TYPE_CHECKING:
    from ..core.metrics.attempts import Selection
    from ..core.reporting.report import Report

T = TypeVar("T")


class StoreThread:
    """Runs store functions on one dedicated thread; ``await call(fn, *args)`` -> ``fn(store, *args)``."""

    def __init__(self, db: str | Path):
        self.db = Path(db)
        self._store: Store | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ui-store", initializer=self._open)

    def _open(self) -> None:
        # The command that opened the TUI checked the store (review, run); the quick check reads
        # every page, which a big store would make the first screen wait for.
        self._store = Store(self.db, check=False)

    def _run(self, fn: Callable[..., T], args: tuple) -> T:
        assert self._store is not None
        return fn(self._store, *args)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._run, fn, args)

    def call_sync(self, fn: Callable[..., T], *args: Any) -> T:
        return self._pool.submit(self._run, fn, args).result()

    def close(self) -> None:
        def close_store() -> None:
            if self._store is not None:
                self._store.close()
                self._store = None

        self._pool.submit(close_store)
        self._pool.shutdown(wait=True)


# -- suite and grid ---------------------------------------------------------------------------


@dataclass
class SuiteOverview:
    suite_id: str | None
    name: str | None = None
    models: list[str] = field(default_factory=list)
    clis: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    trials_per_cell: int = 1
    path: str | None = None

    @property
    def per_cell_total(self) -> int:
        return len(self.tasks) * self.trials_per_cell


def overview(store: Store, suite_id: str | None = None) -> SuiteOverview:
    """The suite's shape: models and CLIs in suite order, tasks, trials per cell."""
    row = store.suite_row(suite_id)
    if row is None:
        latest = store.views.latest_trial_suite()
        if latest is None:
            return SuiteOverview(None)
        row = {"id": latest, "name": None, "path": None}
    sid = row["id"]
    models: list[str] = []
    clis: list[str] = []
    for model, cli in store.views.configuration_pairs(sid):
        if model not in models:
            models.append(model)
        if cli not in clis:
            clis.append(cli)
    tasks = list(store.views.task_tiers(sid)) or store.views.trial_task_ids(sid)
    return SuiteOverview(sid, row.get("name"), models, clis, tasks, _trials_per_cell(store, sid, row.get("path")),
                         row.get("path"))


def _trials_per_cell(store: Store, suite_id: str, path: str | None) -> int:
    if path:
        try:
            with open(Path(path) / "suite.toml", "rb") as handle:
                return int(tomllib.load(handle).get("suite", {}).get("trials", 1))
        except (OSError, tomllib.TOMLDecodeError, ValueError, TypeError):
            pass
    return int(store.views.max_trial_index(suite_id) or 1)


def grid_rows(store: Store, suite_id: str) -> list[dict[str, Any]]:
    return store.views.grid_rows(suite_id)


def latest_scores(store: Store, suite_id: str | None) -> dict[int, float]:
    """Each scored trial's agreed score: adjudicated, else the median of its reviewers (core.review.reviewing)."""
    from ..core.review.reviewing import agreed_scores

    return {t: int(v) if v == int(v) else v for t, v in agreed_scores(store, suite_id).items()}


def ams_by_config(store: Store, suite_id: str) -> dict[tuple[str, str], float | None]:
    """AMS so far per configuration, from the report module (None where a tier has no runs yet)."""
    from ..core.reporting import report_from_store

    report = report_from_store(store, suite_id)
    return {row.config: row.ams for row in report.configurations}


def report(store: Store, suite_id: str | None, selection: Selection = "latest", resamples: int = 0) -> Report:
    from ..core.reporting import report_from_store

    return report_from_store(store, suite_id, selection=selection, rubric=True, agreement=True, resamples=resamples)


# -- one trial ------------------------------------------------------------------------------------


@dataclass
class TrialDetail:
    row: dict[str, Any]
    scores: list[Any]  # ScoreRow history, oldest first
    notes: list[dict[str, Any]]
    siblings: list[dict[str, Any]]  # the cell's trials (same task and configuration), with "score"
    extra: dict[str, Any]
    events: int

    @property
    def score(self):
        return self.scores[-1] if self.scores else None


def trial_detail(store: Store, trial_id: int) -> TrialDetail | None:
    row = store.trial(trial_id)
    if row is None:
        return None
    siblings = store.views.cell_trials(row["suite_id"], row["task_id"], row["model"], row["cli"])
    agreed = latest_scores(store, row["suite_id"])  # several reviewers: the agreed score, not the last edit
    siblings = [{**s, "score": agreed.get(s["id"])} for s in siblings]
    notes = store.views.notes(trial_id)
    try:
        extra = orjson.loads(row["extra"]) if row.get("extra") else {}
    except orjson.JSONDecodeError:
        extra = {"unparsed": row["extra"]}
    return TrialDetail(row, store.reviews.score_history(trial_id), notes, siblings, extra if isinstance(extra, dict) else {},
                       store.event_count(trial_id))


def review_queue(store: Store, suite_id: str | None, flag: str | None = None,
                 by_flags: bool = False) -> list[tuple[int, bool]]:
    """Trials a reviewer may score (finished, not infra-invalid) in review order (by id; flagged
    first with ``by_flags``), only those a scanner flagged ``flag`` when given, and whether each
    has a score."""
    return store.views.review_queue(suite_id, REVIEWABLE_STATUSES, flag=flag, by_flags=by_flags)


def tail_events(store: Store, trial_id: int, count: int) -> list[list]:
    """The last ``count`` events of a trial as feed rows ``[seq, ts, kind, stream, text]``."""
    return [list(r) for r in store.views.tail_events(trial_id, count, LIVE_TEXT)]


# -- transcript index (the review screen's virtual list) ---------------------------------------

# Kinds shown in full by default; everything else starts folded to one line.
OPEN_KINDS = frozenset({"assistant", "error"})
KEEP_CHARS = 4000  # text kept in memory per event; longer texts are read again when unfolded


@dataclass
class EventIndex:
    """A trial's events as the transcript view needs them, in sequence order."""

    seqs: list[int]
    kinds: list[str]
    texts: list[str]  # the text, cut to KEEP_CHARS
    full: list[bool]  # whether texts[i] is the whole text
    failures: set[int]  # indexes of errors and failed tool results


def join_fragments(previous: str, fragment: str) -> str:
    """Consecutive assistant events read as one text. Streaming CLIs (Gemini CLI) print a
    message as many small deltas that carry their own spaces; whole blocks (Claude Code) that
    end a sentence get a line break before the next one."""
    if previous.endswith((".", "!", "?", ":")) and fragment[:1].isupper():
        return previous + "\n" + fragment
    return previous + fragment


def event_index(store: Store, trial_id: int, first: int = 0, last: int | None = None) -> EventIndex:
    """One pass over a trial's events (those with ``first <= seq <= last``: a window of a long
    transcript, see ``transcript_doc``) plus one query for their failures.

    Reading the whole text column and cutting it here is faster than ``substr`` in SQL
    (which must count UTF-8 characters), and the cut bounds memory on huge tool outputs.
    Runs of short assistant events become one entry (the seq of its first event), so a
    streamed message reads as a paragraph rather than as a row per delta.
    """
    seqs: list[int] = []
    kinds: list[str] = []
    texts: list[str] = []
    full: list[bool] = []
    for seq, kind, text in store.views.event_texts(trial_id, first, last):
        text = text or ""
        if (kind == "assistant" and kinds and kinds[-1] == "assistant" and full[-1]
                and len(texts[-1]) + len(text) <= KEEP_CHARS):
            texts[-1] = join_fragments(texts[-1], inert(text))
            continue
        seqs.append(seq)
        kinds.append(kind)
        if len(text) > KEEP_CHARS:
            texts.append(inert(text[:KEEP_CHARS]))
            full.append(False)
        else:
            texts.append(inert(text))
            full.append(True)
    failed_seqs = store.views.failure_seqs(trial_id, first, last)
    failures = {i for i, seq in enumerate(seqs) if seq in failed_seqs} if failed_seqs else set()
    return EventIndex(seqs, kinds, texts, full, failures)


def event_text(store: Store, trial_id: int, seq: int) -> str:
    """The whole text of one event, inert (agent output is shown, never obeyed by the terminal)."""
    return inert(store.views.event_text(trial_id, seq) or "")


def search_events(store: Store, trial_id: int, needle: str, after: int, backwards: bool = False) -> int | None:
    return store.search.search_events(trial_id, needle, after, backwards)


def index_events(store: Store, limit: int) -> int:
    return store.search.index_events(limit)


def next_failure_seq(store: Store, trial_id: int, after: int, backwards: bool = False) -> int | None:
    return store.views.next_failure_seq(trial_id, after, backwards)


def last_seq(store: Store, trial_id: int) -> int:
    return store.views.last_seq(trial_id)
