"""Suites and tasks as loaded: :class:`Task`, :class:`Suite` and a grid :class:`Configuration`,
with what they derive (the seed-prompt hash, a task's budget, a model's scenario).

Loading and checking them is :mod:`.load`; sandboxes and verifiers import this module for its
types, so it imports no registry (that would be an import circle through them).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..harbor.taskfile import HARBOR
from ..tomlerrors import InputError
from .suitefile import CliEntry, ModelEntry, Provider, SuiteFile
from .budget import Budget
from .taskfolders import TaskContract, TaskFile, VerifierSection



@dataclass
class Task:
    id: str
    path: Path
    tier: str | None
    instruction: str
    spec: TaskFile

    @cached_property
    def instruction_hash(self) -> str:
        return hashlib.sha256(self.instruction.encode()).hexdigest()

    @property
    def verifier(self) -> VerifierSection:
        return self.spec.verifier

    @property
    def workspace_seed(self) -> Path | None:
        seed = self.path / "workspace"
        return seed if seed.is_dir() else None

    @property
    def tests_dir(self) -> Path | None:
        tests = self.path / "tests"
        return tests if tests.is_dir() else None

    @property
    def contract(self) -> TaskContract:
        """Harbor's (reward files under /logs/verifier) or agentmeter's (exit code, our reward file)."""
        return TaskContract.HARBOR if self.spec.verifier.kind == HARBOR else TaskContract.AGENTMETER


@dataclass(frozen=True)
class Configuration:
    model: ModelEntry
    cli: CliEntry

    @property
    def key(self) -> str:
        return f"{self.model.id}|{self.cli.label}"


def holds_real_key(kind: str) -> bool:
    """Whether a provider of ``kind`` is a real one, whose key is worth something."""
    return kind not in ("scripted", "none")


@dataclass
class Suite:
    path: Path
    spec: SuiteFile
    tasks: list[Task]
    skipped: list[InputError] = field(default_factory=list)  # external task folders that failed to load

    @property
    def id(self) -> str:
        return self.spec.suite.id

    @property
    def name(self) -> str:
        return self.spec.suite.name or self.id

    @property
    def version(self) -> str:
        return self.spec.suite.version

    @property
    def own(self) -> str | None:
        return self.spec.suite.own

    @property
    def concurrency(self) -> int:
        return self.spec.suite.concurrency

    @property
    def uses_proxy(self) -> bool:
        """Whether trials meter through the metering proxy: as the suite says, else whenever a
        model calls a real provider, so no CLI holds a real key unless the suite said so."""
        if self.spec.suite.proxy is not None:
            return self.spec.suite.proxy
        return any(holds_real_key(self.provider(m).kind) for m in self.spec.models)

    @cached_property
    def seed_hash(self) -> str:
        """sha256 over every task's id and instruction, in task-id order: the suite's contract."""
        digest = hashlib.sha256()
        for task in sorted(self.tasks, key=lambda t: t.id):
            digest.update(f"{task.id}\0{task.instruction_hash}\n".encode())
        return digest.hexdigest()

    def configurations(self) -> list[Configuration]:
        return [Configuration(m, c) for m in self.spec.models for c in self.spec.clis]

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    def budget_for(self, task: Task) -> Budget:
        budgets = self.spec.budgets
        budget = budgets.default
        if task.tier:
            budget = budget.merged(getattr(budgets, task.tier))
        if task.spec.agent.timeout_sec:
            budget = budget.merged(Budget(wall_seconds=task.spec.agent.timeout_sec))
        return budget.merged(task.spec.budgets)

    def provider(self, model: ModelEntry) -> Provider:
        return self.spec.providers[model.provider]

    def scenario_for(self, model: ModelEntry, task: Task) -> Path | None:
        """The scripted scenario a model plays on a task (scripted providers only)."""
        provider = self.provider(model)
        if provider.kind != "scripted":
            return None
        root = self.path / provider.scenarios
        for candidate in (task.path / "scenarios" / f"{model.id}.toml", root / model.id / f"{task.id}.toml",
                          root / f"{model.id}.toml"):
            if candidate.is_file():
                return candidate
        return None
