"""Task folders: which contract a ``task.toml`` follows, Harbor's tables, and finding tasks.

Two task contracts load side by side:

* **agentmeter's own** (``[task]``, ``[verifier] kind = "command" | "differential" | "none"``):
  strict tables, so a typo is an error naming file, line and field;
* **Harbor's** (Terminal-Bench 2 ``version = "2.0"``, Harbor templates ``schema_version = "1.x"``,
  or ``[verifier] kind = "harbor"``): the verifier is ``tests/test.sh`` writing
  ``/logs/verifier/reward.txt|json``, and every table keeps keys we do not know (Harbor grows
  its schema; a dataset written for a newer Harbor must still load).

A suite takes its tasks from its own folder or from ``[suite] tasks_dir`` (a checkout of a
Harbor dataset elsewhere on disk, read in place), filtered by ``include`` / ``exclude`` globs
on the folder names.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

HARBOR = "harbor"


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


def is_harbor(data: dict[str, Any]) -> bool:
    """Whether a parsed task.toml follows Harbor's contract (module docstring)."""
    verifier = data.get("verifier") if isinstance(data.get("verifier"), dict) else {}
    kind = verifier.get("kind")
    if kind is not None:
        return kind == HARBOR
    return "version" in data or "schema_version" in data


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
