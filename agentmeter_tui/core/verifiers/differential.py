"""The ``differential`` verifier: the agent's CLI tool against the task's oracle, as black boxes.

Task authors write, in ``task.toml``::

    [verifier]
    kind = "differential"
    run = "{python} -I -S {tool}/kv.py"        # argv prefix; {tool} = the installed tool folder
    install = "{python} -m py_compile kv.py"   # Build, run in the tool folder (optional)
    cases = "tests/cases.json"                 # made by `agentmeter difftest gen`
    oracle = "tests/oracle"

The agent's finished workspace (or its ``tool_dir``) is the candidate. Both sides are built
and run by the executor of the trial's sandbox (its kind's ``differential_side``: on this machine
for a local trial, in containers of the trial's image for a docker one); a sandbox without one
gets an infra error unless the task says ``run_on = "runner"``. Quality R is the chosen
funnel metric (``metric``, default Fuzzy); the trial passes when the candidate builds and R
reaches ``pass_threshold``. ``details`` holds the whole funnel (see :mod:`..difftest.funnel`).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..difftest import CommandJudge, OracleError, ToolCommand, evaluate, load_cases, render_text
from ..difftest.evaluate import ExecutorFactory
from ..difftest.executor import LocalExecutor, SideError
from ..sandboxes import SANDBOXES
from ..tomlerrors import InputError
from .base import Verifier, VerifierResult

if TYPE_CHECKING:
    from ..sandboxes.base import SandboxSession


class DifferentialVerifier(Verifier):
    kind = "differential"

    class Settings(BaseModel):
        """The ``[verifier]`` keys of a differential task."""

        model_config = ConfigDict(extra="forbid")
        # Paths, checked at load to stay inside their folder: the task's, or the agent's workspace.
        path_fields: ClassVar[dict[str, str]] = {"cases": "task", "oracle": "task", "tool_dir": "workspace"}
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
        # Where both sides are built and run: "sandbox" = the trial's own kind of sandbox (a
        # docker trial's tool runs in containers of its image, never here); "runner" = this
        # machine, whatever the sandbox, which only a task that says so gets.
        run_on: Literal["sandbox", "runner"] = "sandbox"

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
        sandbox = getattr(getattr(session, "slot", None), "sandbox", "local")
        kind = "local" if settings.run_on == "runner" else sandbox
        kind_cls = SANDBOXES.get(kind) if kind in SANDBOXES else None
        if kind_cls is None or kind_cls.differential_side is None:
            message = (f"the differential verifier cannot build and run the agent's tool in a {sandbox} "
                       f"sandbox, and runs it on the runner's machine only when the task's [verifier] "
                       f"says run_on = \"runner\"")
            return VerifierResult(False, 0.0, message, infra_error=message)
        scratch = Path(tempfile.mkdtemp(prefix="agentmeter-diff-"))
        try:
            try:
                sides = kind_cls.differential_sides()
                assert sides is not None  # the kind names a differential side (checked above)
                executor = await sides.for_session(session)
            except Exception as exc:  # noqa: BLE001 - an engine or its SDK failing: our side, whatever it raised
                message = f"the differential verifier's {kind} sides could not be prepared: {exc}"
                return VerifierResult(False, 0.0, message, infra_error=message)
            # The candidate's files are copied here as data only: its code runs where ``executor`` puts it.
            workspace = await session.collect_workspace(scratch / "workspace")
            return await self.judge_folder(workspace / settings.tool_dir, settings, executor)
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, True)

    async def judge_folder(self, candidate: Path, settings: Settings | None = None,
                           executor: ExecutorFactory = LocalExecutor) -> VerifierResult:
        """The verdict on a candidate tool folder (the verifier minus the sandbox); ``executor``
        says where both sides run (default: this machine)."""
        settings = settings or self.settings
        # Off the loop, bounded, a regular file only (a FIFO never waits), under the task folder;
        # an absolute path is the operator's own (`difftest run --cases`): a task's are refused at load.
        root = None if Path(settings.cases).is_absolute() else self.task.path
        try:
            cases = await asyncio.to_thread(load_cases, self.task.path / settings.cases, root)
        except InputError as exc:
            return VerifierResult(False, 0.0, str(exc), infra_error=f"bad case file: {exc}")
        judge = CommandJudge(settings.judge, cwd=self.task.path) if settings.judge else None
        try:
            report = await asyncio.wait_for(
                evaluate(cases, self.task.path / settings.oracle, candidate, settings.tool_command(),
                         metric=settings.metric, fuzzy_threshold=settings.fuzzy_threshold, judge=judge,
                         jobs=settings.jobs, executor=executor),
                settings.timeout_sec)
        except (OracleError, SideError) as exc:
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
