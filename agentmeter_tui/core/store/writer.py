"""The runner's single store writer: a thread that owns the write connection.

Events arrive far faster than one transaction each could commit, so they are appended to a
pending batch that the thread flushes at least every ``FLUSH_SECONDS`` (a crash loses at
most that fraction of a second). Everything else (trial rows, run rows) goes through
:meth:`StoreWriter.call`, which first flushes the pending events, so the store never shows a
trial as finished without the events that led there. sqlite3 releases the GIL while it
steps, so the writer's inserts run on the second core while the event loop parses output.

A full disk under the store (SQLite's ``SQLITE_FULL``, or ``ENOSPC``) loses nothing: the
pending batch stays in memory, a call that failed on it is retried until it goes through, and
``on_full(full, why)`` tells the runner when the disk fills up and when it has room again, so
that it holds new trials back meanwhile (docs/runner.md).

The search index (``search``) is filled here too, but never on the insert path: a tick whose
flush was small (ingest well below what the writer sustains) indexes one chunk of the backlog
after it, so a flood of events is stored at full speed and indexed when it slows down.

An agent can print faster than the store takes rows (a flood of short lines: the event loop
parses them faster than one thread inserts them, and the two share the GIL). So the batch is
bounded: once ``MAX_BACKLOG`` events wait, :meth:`StoreWriter.room` hands the sandboxes a
future and they stop reading the agents' pipes until the writer has taken the batch. The
agent then blocks on its full pipe, as it would writing to a slow terminal: nothing is
dropped, and the runner's memory stays flat however long the flood lasts.
"""

from __future__ import annotations

import asyncio
import errno
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from types import EllipsisType
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..rows import EventRow, UsageRow
from . import Store
from .imports import EVENT_SQL, USAGE_SQL
from .runs import trial_update
from .tx import immediate

FLUSH_SECONDS = 0.1
INDEX_BELOW = 2000  # events in a tick's flush (20k events/s) under which the tick also indexes a chunk
MAX_BACKLOG = 50_000  # events waiting for the writer before agents' output is held back (~15 MB)


FULL_RETRY = 0.25  # seconds between tries while the disk is full


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the store's disk (or its quota) is full."""
    if isinstance(exc, sqlite3.Error):
        return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class StoreWriter:
    def __init__(self, path: str | Path, on_full: Callable[[bool, str], None] | None = None):
        self.store = Store(path)
        self.on_full = on_full
        self.full: str | None = None  # why the disk is full, while it is
        self._events: list[EventRow] = []
        self._usage: list[UsageRow] = []
        self._updates: list[tuple[int, dict[str, Any]]] = []
        self._lock = threading.Lock()
        # a call to run, None to stop, ... to flush now
        self._calls: queue.Queue[tuple[Callable, tuple, Future] | EllipsisType | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="store-writer", daemon=True)
        self.events_written = 0
        self._last_flush = 0  # events in the latest flush
        self.held = 0  # how many times output was held back for the writer (for benchmarks, logs)
        self._room: tuple[asyncio.AbstractEventLoop, asyncio.Future] | None = None
        self._thread.start()

    # -- producer side (event loop thread) --------------------------------------------------

    def add_events(self, rows: Sequence[EventRow], usage: Sequence[UsageRow] = ()) -> None:
        """``rows`` of events and the ``usage`` rows of the calls among them, taken together so
        that one flush writes both: a runner killed between two flushes leaves no call's event
        without its usage row, nor the reverse."""
        with self._lock:
            events = self._events
            before = len(events)
            events.extend(rows)
            self._usage.extend(usage)
            crossed = before < MAX_BACKLOG <= len(events)
        if crossed:
            self._calls.put(...)  # wake the writer now rather than at its next flush time

    def room(self) -> asyncio.Future | None:
        """None while the writer keeps up; else a future, done once the writer has taken the
        waiting events: the caller reads no more agent output until then."""
        if len(self._events) < MAX_BACKLOG:
            return None
        with self._lock:
            if len(self._events) < MAX_BACKLOG:
                return None
            if self._room is None:
                loop = asyncio.get_running_loop()
                self._room = (loop, loop.create_future())
                self.held += 1
            return self._room[1]

    def update_trial(self, trial_id: int, fields: dict[str, Any]) -> None:
        """A trial's new state (running, verifying), written with the next batch of events, in
        their transaction: a transaction and a hop to this thread each cost a trivial trial more
        than the row (issue 28's overhead). Its final row goes through :meth:`call`, awaited."""
        with self._lock:
            self._updates.append((trial_id, fields))

    def call(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run ``fn(store, *args)`` on the writer thread after flushing pending events."""
        future: Future = Future()
        self._calls.put((fn, args, future))
        return future

    def close(self) -> None:
        self._calls.put(None)
        self._thread.join()
        self.store.close()

    # -- writer thread ----------------------------------------------------------------------

    def _flush(self) -> None:
        with self._lock:
            events, self._events = self._events, []
            usage, self._usage = self._usage, []
            updates, self._updates = self._updates, []
            room = None
            if self.full is None:  # on a full disk the agents stay held: the batch comes back
                room, self._room = self._room, None
        self._last_flush = len(events)
        if room is not None:  # the batch is ours: the agents may print the next one meanwhile
            try:
                room[0].call_soon_threadsafe(_release, room[1])
            except RuntimeError:  # the run's loop is closed: nobody waits any more
                pass
        if not events and not usage and not updates:
            return
        conn = self.store.db.conn
        try:
            with immediate(self.store.db):
                if events:
                    conn.executemany(EVENT_SQL, events)
                if usage:
                    conn.executemany(USAGE_SQL, usage)
                for trial_id, fields in updates:
                    conn.execute(*trial_update(trial_id, fields))
        except BaseException:
            # The transaction rolled back, so nothing of the batch is in the store: keep it,
            # ahead of what arrived meanwhile, for the next flush (a full disk may clear).
            with self._lock:
                self._events[:0] = events
                self._usage[:0] = usage
                self._updates[:0] = updates
            raise
        self.events_written += len(events)
        self._set_full(None)

    def _set_full(self, exc: BaseException | None) -> None:
        why = None if exc is None else f"the store's disk is full ({self.store.path}: {exc})"
        if (why is None) == (self.full is None):
            return
        self.full = why
        if self.on_full is not None:
            self.on_full(why is not None, why or "")

    def _until_room(self, attempt: Callable[[], Any]) -> Any:
        """``attempt()``, tried again while the disk is full (each try is one transaction that
        rolled back whole, so a retry never doubles anything)."""
        while True:
            try:
                result = attempt()
            except BaseException as exc:
                if not disk_full(exc):
                    raise
                self._set_full(exc)
                time.sleep(FULL_RETRY)
                continue
            self._set_full(None)
            return result

    def _loop(self) -> None:
        next_flush = time.monotonic() + FLUSH_SECONDS
        while True:
            timeout = max(0.0, next_flush - time.monotonic())
            try:
                item = self._calls.get(timeout=timeout)
            except queue.Empty:
                item = ...
            if item is ... or time.monotonic() >= next_flush:
                self._flush_safely()
                if self._last_flush < INDEX_BELOW:
                    self._index_safely()
                next_flush = time.monotonic() + FLUSH_SECONDS
            if item is None:
                self._flush_safely()
                return
            if item is ...:
                continue
            fn, args, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                self._until_room(self._flush)
                future.set_result(self._until_room(lambda: fn(self.store, *args)))
            except BaseException as exc:  # the caller decides; the writer keeps going
                future.set_exception(exc)

    def _index_safely(self) -> None:
        try:
            self.store.search.index_events()
        except Exception as exc:  # the index is an accelerator: search scans what it lacks
            if disk_full(exc):
                return
            import sys

            print(f"agentmeter: search index update failed: {exc!r}", file=sys.stderr, flush=True)

    def _flush_safely(self) -> None:
        try:
            self._flush()
        except Exception as exc:  # a failed batch must not kill the writer; say so loudly
            if disk_full(exc):  # the batch waits in memory; the runner was told once
                self._set_full(exc)
                return
            import sys

            print(f"agentmeter: store write failed: {exc!r}", file=sys.stderr, flush=True)


def _release(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
