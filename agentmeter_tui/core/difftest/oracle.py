"""The oracle's side of differential tests, shared between the trials of a task.

Every trial of a task runs the same oracle on the same cases, so its build and its case runs
are done once: evaluations that run at the same time (on one event loop, as in the runner)
share the work in flight case by case, and the finished results stay in a small in-process
cache keyed by the oracle's files, the case file and the tool command. Only complete results
are cached, so a cancelled or failed evaluation never leaves half an oracle behind.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from .cases import Case, CaseFile, FileSpec
from .executor import BuildResult, CaseExecutor, CaseRun, ToolCommand
from .snapshot import snapshot

_CACHE_SIZE = 16
_DONE: OrderedDict[str, tuple[BuildResult, dict[str, CaseRun]]] = OrderedDict()
_LIVE: dict[tuple[int, object], OracleSide] = {}  # (event loop, oracle key or a fresh object: not shared)


def oracle_key(oracle_src: Path, cases: CaseFile, command: ToolCommand, kind: str) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps(sorted(snapshot(oracle_src).items())).encode())
    digest.update(cases.model_dump_json().encode())
    digest.update(repr((command, kind)).encode())
    return digest.hexdigest()


class OracleSide:
    """Builds the oracle once and runs each case once, whoever asks first."""

    def __init__(self, executor: CaseExecutor, source: Path, done: tuple | None = None):
        self.executor, self.source = executor, source
        self.users = 0
        self.root: Path | None = None
        self._build: asyncio.Future[BuildResult] | None = None
        self._runs: dict[str, asyncio.Future[CaseRun]] = {}
        self._batches: list[asyncio.Future[list[CaseRun]]] = []
        if done is not None:
            loop = asyncio.get_running_loop()
            self._build = loop.create_future()
            self._build.set_result(done[0])
            for case_id, run in done[1].items():
                self._runs[case_id] = loop.create_future()
                self._runs[case_id].set_result(run)

    async def build(self) -> BuildResult:
        if self._build is None:
            self._build = asyncio.ensure_future(self.executor.build(self.source))
        return await asyncio.shield(self._build)  # one user's cancellation leaves the others' build

    async def run(self, case: Case, files: list[FileSpec]) -> CaseRun:
        return (await self.run_batch([(case, files)]))[0]

    async def run_batch(self, items: list[tuple[Case, list[FileSpec]]]) -> list[CaseRun]:
        """The runs of ``items``: those nobody asked for yet go to the executor as one batch."""
        missing = [(case, files) for case, files in items if case.id not in self._runs]
        if missing:
            batch = asyncio.ensure_future(self.executor.run_batch(missing))
            self._batches.append(batch)
            for index, (case, _) in enumerate(missing):
                self._runs[case.id] = asyncio.ensure_future(_nth(batch, index))
        # Shielded: one user's cancellation leaves the runs the other users wait for.
        return [await asyncio.shield(self._runs[case.id]) for case, _ in items]

    def complete(self, case_ids: list[str]) -> tuple[BuildResult, dict[str, CaseRun]] | None:
        """The results, if the build and every case finished without an error."""
        build = self._build
        futures = [build, *(self._runs.get(c) for c in case_ids)]
        if build is None or not all(f is not None and f.done() and not f.cancelled() and f.exception() is None
                                    for f in futures):
            return None
        return build.result(), {c: self._runs[c].result() for c in case_ids}

    async def close(self) -> None:
        for future in (self._build, *self._batches, *self._runs.values()):
            if future is not None and not future.done():
                future.cancel()
        await self.executor.close()


async def _nth(batch: asyncio.Future[list[CaseRun]], index: int) -> CaseRun:
    return (await asyncio.shield(batch))[index]


def executor_key(executor: Callable[[Path, ToolCommand], CaseExecutor]) -> str:
    """What besides the oracle and the cases decides its results: the executor kind, and for a
    sandbox the image and limits it runs in (``cache_key``)."""
    return getattr(executor, "cache_key", None) or getattr(executor, "__name__", None) or repr(executor)


@asynccontextmanager
async def shared_oracle(source: Path, cases: CaseFile, command: ToolCommand,
                        executor: Callable[[Path, ToolCommand], CaseExecutor],
                        use_cache: bool = True) -> AsyncIterator[OracleSide]:
    """The oracle side for one evaluation: shared and cached unless ``use_cache`` is off."""
    key = oracle_key(source, cases, command, executor_key(executor))
    live_key = (id(asyncio.get_running_loop()), key if use_cache else object())
    side = _LIVE.get(live_key)
    if side is None:
        root = Path(tempfile.mkdtemp(prefix="difftest-oracle-"))
        # Other trials' evaluations may join this side: a sandbox makes it apart from the trial.
        make = getattr(executor, "shared", executor)
        side = _LIVE[live_key] = OracleSide(make(root, command), source, _DONE.get(key) if use_cache else None)
        side.root = root
    side.users += 1
    try:
        yield side
    finally:
        side.users -= 1
        if side.users == 0:
            del _LIVE[live_key]
            results = side.complete([c.id for cls in cases.classes for c in cls.cases])
            if use_cache and results is not None:
                _DONE[key] = results
                _DONE.move_to_end(key)
                while len(_DONE) > _CACHE_SIZE:
                    _DONE.popitem(last=False)
            await side.close()
            if side.root is not None:
                shutil.rmtree(side.root, ignore_errors=True)


def clear_oracle_cache() -> None:
    _DONE.clear()
