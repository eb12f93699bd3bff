"""Differential evaluation: build both sides, run every case on each, judge, and score the funnel.

The oracle's side is the same for every trial of a task, so its build and case runs are kept
in a small in-process cache keyed by the oracle's files, the case file and the tool command:
a runner judging many trials runs the oracle once. Cases run concurrently (``jobs`` at a time);
each case's oracle and candidate runs are made back to back so both see the same load, which
keeps the runtime ratio honest.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shlex
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from .cases import Case, CaseFile
from .executor import BuildResult, CaseExecutor, CaseRun, LocalExecutor, ToolCommand, run_process
from .funnel import CaseVerdict, FunnelReport, class_scores, judge_case
from .snapshot import snapshot

ExecutorFactory = Callable[[Path, ToolCommand], CaseExecutor]
_ORACLE_CACHE: OrderedDict[str, tuple[BuildResult, dict[str, CaseRun]]] = OrderedDict()
_ORACLE_CACHE_SIZE = 16


class OracleError(RuntimeError):
    """The oracle itself failed (did not install): our side, not the candidate's."""


class CommandJudge:
    """Semantic Match through a command: ``COMMAND ORACLE_FILE CANDIDATE_FILE`` (the two stdouts,
    argv of the case in ``DIFFTEST_ARGV`` as JSON) must print ``yes`` or ``no`` first."""

    def __init__(self, command: str, cwd: Path, timeout: float = 60.0):
        self.command, self.cwd, self.timeout = command, cwd, timeout

    async def __call__(self, oracle: str, candidate: str, argv: list[str]) -> tuple[bool, str]:
        with tempfile.TemporaryDirectory(prefix="difftest-judge-") as tmp:
            paths = [Path(tmp) / "oracle.txt", Path(tmp) / "candidate.txt"]
            paths[0].write_text(oracle, encoding="utf-8")
            paths[1].write_text(candidate, encoding="utf-8")
            argv_judge = shlex.split(self.command) + [str(p) for p in paths]
            env = {**os.environ, "DIFFTEST_ARGV": json.dumps(argv)}
            code, out, err, _ = await run_process(argv_judge, cwd=self.cwd, env=env, stdin=None,
                                                  timeout=self.timeout)
        answer = out.decode("utf-8", "replace").strip()
        if code != 0:
            return False, f"judge failed (exit {code}): {err.decode('utf-8', 'replace').strip()[:200]}"
        first = answer.split(maxsplit=1)[0].strip(".,:;!").lower() if answer else ""
        if first not in ("yes", "no"):
            return False, f"judge gave no yes/no answer: {answer[:200]!r}"
        return first == "yes", answer[:200]


def _cache_key(oracle_src: Path, cases: CaseFile, command: ToolCommand, kind: str) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps(sorted(snapshot(oracle_src).items())).encode())
    digest.update(cases.model_dump_json().encode())
    digest.update(repr((command, kind)).encode())
    return digest.hexdigest()


def default_jobs() -> int:
    return max(2, min(8, (os.cpu_count() or 2) * 2))  # case runs mostly wait on process start-up


async def evaluate(cases: CaseFile, oracle_src: Path, candidate_src: Path, command: ToolCommand, *,
                   metric: str = "fuzzy", fuzzy_threshold: float = 0.8,
                   judge: Callable | None = None, jobs: int | None = None,
                   executor: ExecutorFactory = LocalExecutor, use_cache: bool = True,
                   workdir: Path | None = None) -> FunnelReport:
    """Judge ``candidate_src`` against ``oracle_src`` on every case of ``cases``."""
    root = Path(tempfile.mkdtemp(prefix="difftest-", dir=workdir))
    limit = asyncio.Semaphore(jobs or default_jobs())
    cache_key = _cache_key(oracle_src, cases, command, getattr(executor, "__name__", str(executor)))
    cached = _ORACLE_CACHE.get(cache_key) if use_cache else None
    oracle_side = executor(root / "oracle", command)
    candidate_side = executor(root / "candidate", command)
    all_cases = [(cls.id, case) for cls in cases.classes for case in cls.cases]
    try:
        candidate_build = await candidate_side.build(candidate_src)
        if cached:
            oracle_build, oracle_runs = cached
        else:
            oracle_build = await oracle_side.build(oracle_src)
            if not oracle_build.ok:
                raise OracleError(f"the oracle does not install (exit {oracle_build.exit_code}): "
                                  f"{oracle_build.output.strip()[-500:]}")
            oracle_runs = {}
        if not candidate_build.ok:
            verdicts: list[CaseVerdict] = []  # Build failed: every score is 0, nothing else to learn
        else:
            async def one(class_id: str, case: Case) -> CaseVerdict:
                files = cases.files_for(case)
                async with limit:
                    if case.id not in oracle_runs:
                        oracle_runs[case.id] = await oracle_side.run(case, files)
                    candidate_run = await candidate_side.run(case, files)
                verdict = judge_case(class_id, case.id, case.argv, case.stdin, oracle_runs[case.id],
                                     candidate_run, fuzzy_threshold, case.oracle_exit)
                if judge is not None and verdict.valid:
                    await _semantic(verdict, judge, limit)
                return verdict

            verdicts = list(await asyncio.gather(*(one(cid, case) for cid, case in all_cases)))
            if use_cache and not cached:
                _ORACLE_CACHE[cache_key] = (oracle_build, oracle_runs)
                while len(_ORACLE_CACHE) > _ORACLE_CACHE_SIZE:
                    _ORACLE_CACHE.popitem(last=False)
    finally:
        await oracle_side.close()
        await candidate_side.close()
        shutil.rmtree(root, ignore_errors=True)
    classes = class_scores(verdicts, [cls.id for cls in cases.classes])
    return FunnelReport(metric=metric, oracle_build=oracle_build, candidate_build=candidate_build,
                        verdicts=verdicts, classes=classes, semantic_on=judge is not None)


async def _semantic(verdict: CaseVerdict, judge: Callable, limit: asyncio.Semaphore) -> None:
    assert verdict.candidate is not None
    if verdict.exact:
        # Equal payloads need no judge; it also keeps the judge's bill to the cases that differ.
        verdict.semantic, verdict.judge_note = True, "identical once whitespace is removed"
        return
    async with limit:
        verdict.semantic, verdict.judge_note = await judge(verdict.oracle.stdout, verdict.candidate.stdout,
                                                           verdict.argv)


def clear_oracle_cache() -> None:
    _ORACLE_CACHE.clear()
