"""The ``differential`` verifier: the agent's CLI tool against the task's oracle, as black boxes.

Task authors write, in ``task.toml``::

    [verifier]
    kind = "differential"
    run = "{python} -I -S {tool}/kv.py"        # argv prefix; {tool} = the installed tool folder
    install = "{python} -m py_compile kv.py"   # Build, run in the tool folder (optional)
    cases = "tests/cases.json"                 # made by `agentmeter difftest gen`
    oracle = "tests/oracle"

The agent's finished workspace (or its ``tool_dir``) is the candidate. Quality R is the chosen
funnel metric (``metric``, default Fuzzy); the trial passes when the candidate builds and R
reaches ``pass_threshold``. ``details`` holds the whole funnel (see :mod:`..difftest.funnel`).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..difftest import CommandJudge, OracleError, ToolCommand, evaluate, load_cases, render_text
from ..tomlerrors import InputError
from .base import Verifier, VerifierResult

if TYPE_CHECKING:
    from ..sandboxes.base import SandboxSession


class DifferentialVerifier(Verifier):
    kind = "differential"

    class Settings(BaseModel):
        """The ``[verifier]`` keys of a differential task."""

        model_config = ConfigDict(extra="forbid")
        kind: Literal["differential"] = "differential"
        command: str | None = None  # common to every kind; the differential verifier has run/install instead
        timeout_sec: float = Field(600, gt=0)  # the whole evaluation
        run: str = Field(min_length=1)
        install: str | None = None
        cases: str = "tests/cases.json"
        oracle: str = "tests/oracle"
        tool_dir: str = "."  # the candidate tool inside the agent's workspace
        metric: Literal["exec", "side_effects", "exact", "fuzzy", "semantic"] = "fuzzy"
        pass_threshold: float = Field(1.0, ge=0, le=1)
        fuzzy_threshold: float = Field(0.8, ge=0, le=1)
        judge: str | None = None  # Semantic Match command, run in the task folder; off when unset
        case_timeout_sec: float = Field(10, gt=0)
        build_timeout_sec: float = Field(300, gt=0)
        jobs: int | None = Field(None, ge=1, le=64)
        env: dict[str, str] = {}

        @model_validator(mode="after")
        def _coherent(self) -> DifferentialVerifier.Settings:
            if self.command is not None:
                raise ValueError("a differential verifier takes 'run' and 'install', not 'command'")
            if self.metric == "semantic" and not self.judge:
                raise ValueError("metric 'semantic' needs a 'judge' command")
            return self

        def tool_command(self) -> ToolCommand:
            return ToolCommand(run=self.run, install=self.install, env=tuple(sorted(self.env.items())),
                               case_timeout=self.case_timeout_sec, build_timeout=self.build_timeout_sec)

    @property
    def settings(self) -> Settings:
        return self.Settings.model_validate(self.task.verifier.model_dump())

    async def verify(self, session: SandboxSession) -> VerifierResult:
        settings = self.settings
        scratch = Path(tempfile.mkdtemp(prefix="agentmeter-diff-"))
        try:
            workspace = await session.collect_workspace(scratch / "workspace")
            return await self.judge_folder(workspace / settings.tool_dir, settings)
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, True)

    async def judge_folder(self, candidate: Path, settings: Settings | None = None) -> VerifierResult:
        """The verdict on a candidate tool folder on this machine (the verifier minus the sandbox)."""
        settings = settings or self.settings
        try:
            cases = load_cases(self.task.path / settings.cases)
        except InputError as exc:
            return VerifierResult(False, 0.0, str(exc), infra_error=f"bad case file: {exc}")
        judge = CommandJudge(settings.judge, cwd=self.task.path) if settings.judge else None
        try:
            report = await asyncio.wait_for(
                evaluate(cases, self.task.path / settings.oracle, candidate, settings.tool_command(),
                         metric=settings.metric, fuzzy_threshold=settings.fuzzy_threshold, judge=judge,
                         jobs=settings.jobs),
                settings.timeout_sec)
        except OracleError as exc:
            return VerifierResult(False, 0.0, str(exc), infra_error=str(exc))
        except TimeoutError:
            message = f"differential evaluation took longer than {settings.timeout_sec:g} s"
            return VerifierResult(False, 0.0, message, infra_error=message)
        details = report.as_dict()
        if not any(c.positives for c in report.classes) and report.built:
            message = "no case where the oracle exits 0: the case file does not test anything"
            return VerifierResult(False, 0.0, message, details=details, infra_error=message)
        quality = report.score
        passed = report.built and quality >= settings.pass_threshold - 1e-9
        return VerifierResult(passed=passed, quality=quality, output=render_text(details),
                              exit_code=0 if passed else 1, details=details)
