"""The site's trial pages and ATIF files: most of a site's bytes and time (a paper grid has 9,720
trials of a few hundred events each), so they are written by worker processes, one store
connection each, when there are enough of them to pay for the workers' start. A worker takes a
chunk of trials and reads all their events and usage rows in one streamed query each (a query
per trial cost more than the rows), and writes each ATIF file from
:func:`~agentmeter_tui.core.interop.atif.trajectory_json` (the export's bytes, without building
the pydantic models)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from ...interop.atif import trajectory_json
from ...usage import TOKEN_CLASSES
from ..render import fmt_tokens, fmt_usd
from . import model
from .presplit import PreSplit

TEMPLATES = Path(__file__).parent / "templates"
PARALLEL_FROM = 200  # fewer trials than this: written in this process
CHUNK = 64


@dataclass
class Shared:
    """What every trial page needs besides its own rows (sent once to each worker)."""

    common: dict[str, Any]
    names: model.Names
    config_index: dict[tuple[str, str], int]
    scores: dict[int, list[Any]]
    notes: dict[int, list[dict[str, Any]]]
    flags: dict[int, list[Any]] = field(default_factory=dict)  # triage flags by trial (``store.flags.flags_of``)


def trial_line(trial: dict[str, Any], scores: list[Any], names: model.Names, flags: Sequence[Any] = ()) -> dict[str, Any]:
    raw = sum(int(trial.get(c) or 0) for c in TOKEN_CLASSES)
    latest = scores[-1].score if scores else None
    # a task named after a model (a Harbor trial folder, an ATIF file's name) is masked too
    return {"id": trial["id"], "task": names.text(trial["task_id"]), "index": trial["trial_index"], "status": trial["status"],
            "reason": names.text(trial.get("reason")), "quality": f"{float(trial.get('quality') or 0):g}",
            "raw": raw, "raw_text": fmt_tokens(raw), "cost": fmt_usd(trial.get("cost_usd")),
            "cost_sort": "" if trial.get("cost_usd") is None else trial["cost_usd"],
            "score": "" if latest is None else latest,
            "flags": ", ".join(f.scanner for f in flags if f.verdict != "wrong")}


def environment() -> Any:
    from ...extras import require

    jinja2 = require("jinja2")
    Environment, FileSystemLoader, StrictUndefined = jinja2.Environment, jinja2.FileSystemLoader, jinja2.StrictUndefined

    # Autoescape everything: transcripts, verifier output and notes are untrusted text.
    # No auto_reload: the templates do not change during a build, and checking them costs a stat
    # of each (the page and the base it extends) per page.
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                       trim_blocks=False, keep_trailing_newline=True, auto_reload=False)


_WORKER: dict[str, Any] = {}


def _start(db: Path, folder: Path, shared: Shared) -> None:
    from ...store import Store

    # Read-only, without the damage scan: the parent has this store open (a site only reads it).
    _WORKER.update(store=Store(db, readonly=True), folder=folder, shared=shared,
                   page=PreSplit(environment().get_template("trial.html")))


def _start_worker(db: Path, folder: Path, shared: Shared) -> None:
    _start(db, folder, shared)
    # A trial's rows, events and steps are thousands of young objects, freed by their counts once its
    # files are written, yet the collector scanned them some four times a trial (about 6 % of a
    # worker's CPU). With this threshold it did not run once in 1,000 trials of the paper grid;
    # anything left in a cycle still counts towards it, and the worker exits when the site is written.
    gc.freeze()
    gc.set_threshold(100_000, *gc.get_threshold()[1:])


def _chunk(trials: Sequence[dict[str, Any]]) -> int:
    store = _WORKER["store"]
    ids = [t["id"] for t in trials]
    events = dict(store.events_of(ids))
    usage = store.usage_of(ids)
    for trial in trials:
        _write(trial, events.get(trial["id"], []), usage.get(trial["id"], {}), _WORKER["folder"], _WORKER["page"],
               _WORKER["shared"])
    return len(trials)


def write_trials(db: Path, folder: Path, trials: Sequence[dict[str, Any]], shared: Shared,
                 meanwhile: Callable[[], None] = lambda: None) -> None:
    """Write the trial pages and ATIF files; ``meanwhile``: the parent's own pages, run while the
    workers write (the parent idles otherwise, and on two cores a serial second of it is a second
    of wall time)."""
    # The objects made so far (the report, every trial's row) live until the site is written: the
    # collector need not scan them again and again, nor touch (and so copy) them in each worker.
    gc.freeze()
    try:
        _write_trials(db, folder, trials, shared, meanwhile)
    finally:
        gc.unfreeze()


def _write_trials(db: Path, folder: Path, trials: Sequence[dict[str, Any]], shared: Shared,
                  meanwhile: Callable[[], None]) -> None:
    workers = min(os.cpu_count() or 1, 4)
    if len(trials) < PARALLEL_FROM or workers < 2 or "fork" not in _methods():
        meanwhile()
        _start(db, folder, shared)
        try:
            for n in range(0, len(trials), CHUNK):
                _chunk(trials[n:n + CHUNK])
        finally:
            _WORKER.pop("store").close()
        return
    _warm(trials)
    chunks = _chunks(trials, workers)
    with ProcessPoolExecutor(workers, mp_context=get_context("fork"), initializer=_start_worker,
                             initargs=(db, folder, shared)) as pool:
        done = pool.map(_chunk, chunks)  # every chunk is queued (and the workers forked) here
        meanwhile()
        for _ in done:
            pass


def _chunks(trials: Sequence[dict[str, Any]], workers: int) -> list[Sequence[dict[str, Any]]]:
    """Chunks of CHUNK trials, the last few of a quarter of that: a worker that takes the last big
    chunk as the others run out of work would leave their cores idle for most of a chunk's time."""
    small = max(1, CHUNK // 4)
    head = max(0, len(trials) - 2 * workers * CHUNK)
    head -= head % CHUNK
    return [*(trials[n:n + CHUNK] for n in range(0, head, CHUNK)),
            *(trials[n:n + small] for n in range(head, len(trials), small))]


def _warm(trials: Sequence[dict[str, Any]]) -> None:
    """Import the trials' CLI parsers (ATIF re-runs them) once, before the fork, not in each worker."""
    from ...harnesses import ADAPTERS, get_adapter

    for cli in {t["cli"] for t in trials}:
        if cli in ADAPTERS:
            get_adapter(cli).new_parser()


def _methods() -> list[str]:
    from multiprocessing import get_all_start_methods

    return get_all_start_methods()


def _write(trial: dict[str, Any], events: list[tuple], usage_rows: dict[int, dict], folder: Path, page: Any,
           shared: Shared) -> None:
    text = page.render(**trial_context(trial, events, shared, usage_rows))
    stem = f"{folder}/trial/{trial['id']}"
    _put(stem + ".html", text.encode())
    atif = trajectory_json(events, trial=trial, usage_rows=usage_rows)  # the bytes `agentmeter export atif` writes
    _put(stem + ".atif.json", shared.names.text(atif.decode()).encode() if shared.names.blind else atif)


def trial_context(trial: dict[str, Any], events: list[tuple], shared: Shared,
                  usage_rows: dict[int, dict] | None = None) -> dict[str, Any]:
    """What trial.html is rendered with for one trial."""
    names = shared.names
    transcript = model.transcript_html(events, names, usage_rows)
    scores = shared.scores.get(trial["id"], [])
    usage = [int(trial.get(c) or 0) for c in TOKEN_CLASSES]
    actual = trial.get("cost_actual_usd")
    return dict(
        **shared.common, root="../", title=f"Trial {trial['id']}", t=trial_line(trial, scores, names),
        config=f"{names(trial['model'])} / {names(trial['cli'])}",
        config_index=shared.config_index.get((trial["model"], trial["cli"]), 0),
        usage_header=[*TOKEN_CLASSES, "raw", "USD comparable", "USD actual", "turns", "tool calls"],
        usage=[*(f"{v:,}" for v in usage), f"{sum(usage):,}", fmt_usd(trial.get("cost_usd")),
               fmt_usd(actual) if actual is not None else "—", trial.get("turns") or 0, trial.get("tool_calls") or 0],
        scores=[{"score": s.score, "reviewer": names.text(s.reviewer), "role": s.role, "time": s.created_at,
                 "note": names.text(s.note)} for s in scores],
        notes=[{"author": names.text(n.get("author")), "time": n.get("created_at"), "text": names.text(n.get("text"))}
               for n in shared.notes.get(trial["id"], [])],
        flags=[{"scanner": f.scanner, "why": names.text(f.why), "evidence": list(f.evidence), "verdict": f.verdict,
                "reviewer": names.text(f.reviewer)} for f in shared.flags.get(trial["id"], [])],
        verifier=names.text(trial.get("verifier_output")), event_count=len(events),
        transcript=transcript.html, first_error=transcript.first_error, calls=transcript.calls)


def _put(path: str, data: bytes) -> None:
    """Write a new file: two files per trial, twenty thousand in a paper grid, so with the fewest
    calls (no path object, no buffered file object around the one write)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
