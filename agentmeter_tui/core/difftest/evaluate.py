"""Differential evaluation: build both sides, run every case on each, judge, and score the funnel.

The oracle's side is shared between the trials of a task (:mod:`.oracle`). Cases go to the
executors in batches (one case per batch on this machine, dozens in a container), ``jobs``
batches at a time; each batch runs on the oracle and then on the candidate back to back, so
both see the same load, which keeps the runtime ratio honest.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path

from .cases import Case, CaseFile
from .executor import CaseExecutor, LocalExecutor, ToolCommand, discard, run_process
from .funnel import CaseVerdict, FunnelReport, class_scores, judge_case
from .oracle import shared_oracle

ExecutorFactory = Callable[[Path, ToolCommand], CaseExecutor]
MAX_BATCH = 32  # cases per batch at most: a batch's results come back (and are judged) together


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


def default_jobs() -> int:
    return max(2, min(8, (os.cpu_count() or 2) * 2))  # case runs mostly wait on process start-up


def batch_size(executor: CaseExecutor, cases: int, jobs: int) -> int:
    """Cases per ``run_batch`` call: the executor's own size, or (0) the cases split evenly over
    the jobs, a few batches per job so that the last ones do not leave the others idle."""
    if executor.batch_size:
        return executor.batch_size
    return max(1, min(MAX_BATCH, -(-cases // (jobs * 2))))


async def evaluate(cases: CaseFile, oracle_src: Path, candidate_src: Path, command: ToolCommand, *,
                   metric: str = "fuzzy", fuzzy_threshold: float = 0.8,
                   judge: Callable | None = None, jobs: int | None = None,
                   executor: ExecutorFactory = LocalExecutor, use_cache: bool = True) -> FunnelReport:
    """Judge ``candidate_src`` against ``oracle_src`` on every case of ``cases``."""
    root = Path(tempfile.mkdtemp(prefix="difftest-candidate-"))
    limit = asyncio.Semaphore(jobs or default_jobs())
    candidate_side = executor(root, command)
    try:
        async with shared_oracle(oracle_src, cases, command, executor, use_cache) as oracle_side:
            candidate_build, oracle_build = await asyncio.gather(candidate_side.build(candidate_src),
                                                                 oracle_side.build())
            if not oracle_build.ok:
                raise OracleError(f"the oracle does not install (exit {oracle_build.exit_code}): "
                                  f"{oracle_build.output.strip()[-500:]}")
            verdicts: list[CaseVerdict] = []  # Build failed: every score is 0, nothing else to learn
            if candidate_build.ok:
                async def batch(items: list[tuple[str, Case]]) -> list[CaseVerdict]:
                    pairs = [(case, cases.files_for(case)) for _, case in items]
                    async with limit:
                        oracle_runs = await oracle_side.run_batch(pairs)
                        candidate_runs = await candidate_side.run_batch(pairs)
                    judged = [judge_case(class_id, case.id, case.argv, case.stdin, oracle_run, candidate_run,
                                         fuzzy_threshold, case.oracle_exit)
                              for (class_id, case), oracle_run, candidate_run
                              in zip(items, oracle_runs, candidate_runs, strict=True)]
                    if judge is not None:
                        await asyncio.gather(*(_semantic(v, judge, limit) for v in judged if v.valid))
                    return judged

                every = [(cls.id, case) for cls in cases.classes for case in cls.cases]
                size = batch_size(candidate_side, len(every), jobs or default_jobs())
                batches = [every[start:start + size] for start in range(0, len(every), size)]
                verdicts = [v for done in await asyncio.gather(*map(batch, batches)) for v in done]
    finally:
        await candidate_side.close()
        discard(root)
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


