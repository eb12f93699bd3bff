"""Task folders: the ``task.toml`` models, which contract a task follows (:class:`TaskContract`),
and finding tasks.

Two task contracts load side by side:

* **agentmeter's own** (``[task]``, ``[verifier] kind = "command" | "differential" | "none"``):
  strict tables, so a typo is an error naming file, line and field;
* **Harbor's**: the same tables keeping keys we do not know, modelled in
  ``core/harbor/taskfile.py`` (which also tells the two apart).

A suite takes its tasks from its own folder or from ``[suite] tasks_dir`` (a checkout of a
Harbor dataset elsewhere on disk, read in place), filtered by ``include`` / ``exclude`` globs
on the folder names.
"""

from __future__ import annotations

from collections.abc import Sequence

import os
import re
from enum import StrEnum
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..capabilities import capability_name
from ..wire import provider_kinds
from ..vocab import Tier
from .budget import Budget
from .strict import Strict


class Open(BaseModel):
    """A Harbor table: known keys typed, the others kept (``model_extra``)."""

    model_config = ConfigDict(extra="allow")


class EnvironmentSection(Open):
    """``[environment]``: Harbor's keys, as Terminal-Bench 2 and Harbor's templates write them."""

    docker_image: str | None = None
    build_timeout_sec: float = Field(600, gt=0)
    cpus: float | None = Field(None, gt=0)
    memory_mb: int | None = Field(None, gt=0)
    storage_mb: int | None = Field(None, gt=0)
    allow_internet: bool = True
    workdir: str | None = None  # newer tasks name the agent's working folder here; default the image's WORKDIR
    host_labels: list[str] = []  # ours: hosts a task must run on (placement)
    # ours: Linux capabilities the trial's container gets back (all are dropped but five root needs)
    capabilities: list[str] = []

    @field_validator("capabilities")
    @classmethod
    def _capabilities(cls, names: list[str]) -> list[str]:
        return [capability_name(name) for name in names]


class TaskSection(Strict):
    id: str | None = None
    tier: Tier | None = None
    description: str = ""


class AgentSection(BaseModel):
    model_config = ConfigDict(extra="allow")  # Harbor keeps more agent settings here
    timeout_sec: float | None = Field(None, gt=0)


class VerifierSection(BaseModel):
    """``kind`` picks the verifier; kind-specific keys are validated by that verifier."""

    model_config = ConfigDict(extra="allow")
    kind: str = "command"
    command: str | None = None  # default: "sh {tests}/test.sh" when tests/test.sh exists
    timeout_sec: float = Field(600, gt=0)


class TaskFile(Strict):
    version: str | None = None  # Harbor's schema version
    schema_version: str | None = None
    task: TaskSection = TaskSection()
    metadata: dict[str, Any] = {}
    agent: AgentSection = AgentSection()
    verifier: VerifierSection = VerifierSection()
    environment: EnvironmentSection = EnvironmentSection()
    solution: dict[str, Any] = {}
    budgets: Budget | None = None


class TaskContract(StrEnum):
    """Which contract a task follows (``Task.contract``; the value is its name in messages).
    What differs between the two is asked by name, one property per question, so a call site
    says why it branches rather than which contract it compares with."""

    AGENTMETER = "agentmeter"  # our verifier kinds: an exit code, our reward file
    HARBOR = "harbor"  # Harbor's tests/test.sh writing /logs/verifier/reward.* (core/harbor)

    @property
    def needs_container(self) -> bool:
        """Its trials run only in a sandbox kind that gives Harbor's container contract
        (``Sandbox.harbor_contract``): its tests write under /logs/verifier."""
        return self is TaskContract.HARBOR

    @property
    def image_contract(self) -> bool:
        """Its trials run under what its image says (WORKDIR, ENV; ``core/harbor/contract.py``):
        one container the agent and the verifier exec into, shaped by the image."""
        return self is TaskContract.HARBOR

    @property
    def agent_as_root(self) -> bool:
        """Its agent runs as root, as Harbor runs agents, unless the suite names a ``[sandbox]
        user`` (``harbor.contract.run_as``); otherwise as the sandbox's own user."""
        return self is TaskContract.HARBOR

    @property
    def agent_from_bundle(self) -> bool:
        """Its agent runs in the task's own image, which has no node or Python of its own: an
        npm or PyPI CLI starts from the runtime bundle mounted into it (``check_bundle``)."""
        return self is TaskContract.HARBOR

    @property
    def reads_transcript(self) -> bool:
        """Its verifier is given the trial's transcript (an ATIF trajectory): Harbor's LLM-judge
        verifiers read it."""
        return self is TaskContract.HARBOR


def task_folders(root: Path, include: list[str], exclude: list[str]) -> list[Path]:
    """Folders directly under ``root`` holding a task.toml, by name, filtered by the globs."""
    found = []
    for folder in sorted(p for p in root.iterdir() if (p / "task.toml").is_file()):
        if include and not any(fnmatch(folder.name, pattern) for pattern in include):
            continue
        if any(fnmatch(folder.name, pattern) for pattern in exclude):
            continue
        found.append(folder)
    return found


def suite_toml(suite_id: str, tasks_dir: str, *, models: list[str], clis: list[str], provider: str,
               sandbox: str, include: Sequence[str] = (), exclude: Sequence[str] = (), trials: int = 1) -> str:
    """The text of a suite.toml over a task folder read in place (``agentmeter suite new``)."""
    def q(value: str) -> str:
        return _toml_string(value)

    lines = ["# Written by `agentmeter suite new`; the tasks are read in place from tasks_dir.", "[suite]",
             f"id = {q(suite_id)}", f"trials = {trials}", f"tasks_dir = {q(tasks_dir)}"]
    if include:
        lines.append(f"include = [{', '.join(q(p) for p in include)}]")
    if exclude:
        lines.append(f"exclude = [{', '.join(q(p) for p in exclude)}]")
    for model in models:
        lines += ["", "[[models]]", f"id = {q(model)}", f"provider = {q(provider)}"]
    for cli in clis:
        lines += ["", "[[clis]]", f"adapter = {q(cli)}"]
    key = provider if re.fullmatch(r"[A-Za-z0-9_-]+", provider) else q(provider)
    lines += ["", f"[providers.{key}]", f"kind = {q(provider)}"]
    if provider == "scripted":
        lines.append('scenarios = "scenarios"  # MODEL/TASK.toml or MODEL.toml per scripted model')
    elif (protocol := provider_kinds().get(provider)) is not None and protocol.key_env:
        # where the key is read from (the key is never stored): the protocol's first SDK variable
        lines.append(f"api_key_env = {q(protocol.key_env[0])}")
    lines += ["", "[sandbox]", f"kind = {q(sandbox)}", ""]
    return "\n".join(lines)


def tasks_dir_for(tasks: Path, suite: Path) -> str:
    """How a suite file names its task folder: relative when close by (the pair can move
    together), absolute when the path would climb far up."""
    relative = os.path.relpath(tasks, suite)
    return str(tasks) if relative.startswith("../../..") else relative


def _toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these characters)."""
    import json

    return json.dumps(value, ensure_ascii=False)
