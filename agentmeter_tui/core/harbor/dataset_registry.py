"""A dataset registry in Harbor's format: a JSON list of datasets, each with a name, a version,
a description and tasks, each task a git URL, a commit and a path inside the repository.

The field names are Harbor's own (laude-institute/harbor, src/harbor/models/registry.py:
``DatasetSpec`` {name, version, description, tasks, metrics} and ``RegistryTaskId`` {name,
git_url, git_commit_id, path}; ``Registry.from_path`` reads the file as a list of DatasetSpec).
Harbor lets a task have no commit (its HEAD then); we pin every task, so a task without
``git_commit_id`` is refused: a benchmark whose tasks move under it measures nothing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError

REGISTRY_ENV = "AGENTMETER_REGISTRY"  # the setting: a registry file or URL when --registry is not given
COMMIT = r"^[0-9a-fA-F]{7,40}$"


class RegistryError(ValueError):
    """A registry that cannot be used: the message names the file and the field."""


class RegistryTask(BaseModel):
    model_config = ConfigDict(extra="allow")  # Harbor grows its schema; unknown keys are kept
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    git_url: str = Field(min_length=1)
    git_commit_id: str = Field(pattern=COMMIT)
    path: str

    def folder(self) -> str:
        """The task's path in its repository, checked: relative, never climbing out."""
        parts = Path(self.path).parts
        if Path(self.path).is_absolute() or ".." in parts:
            raise ValueError(f"path '{self.path}' leaves the repository")
        return "/".join(parts) or "."


class Dataset(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    description: str = ""
    tasks: list[RegistryTask] = []

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


def is_dataset_ref(text: str) -> bool:
    """``NAME@VERSION`` (and not a path that exists)."""
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]*@[A-Za-z0-9][A-Za-z0-9._+-]*", text)) \
        and not Path(text).exists()


def read_registry(source: str) -> list[Dataset]:
    """The datasets of a registry file (a path or file:// URL) or an http(s) URL."""
    text = _read(source)
    try:
        rows = json.loads(text)
    except ValueError as exc:
        raise RegistryError(f"{source}: not JSON ({exc})") from None
    if not isinstance(rows, list):
        raise RegistryError(f"{source}: expected a JSON list of datasets (Harbor's registry.json)")
    datasets = []
    for index, row in enumerate(rows):
        try:
            dataset = Dataset.model_validate(row)
            for number, task in enumerate(dataset.tasks):
                try:
                    task.folder()
                except ValueError as exc:
                    raise RegistryError(f"{source}: field '[{index}].tasks[{number}].path': {exc}") from None
        except ValidationError as exc:
            error = exc.errors()[0]
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
            raise RegistryError(f"{source}: field '[{index}]{where}': {error['msg']}") from None
        datasets.append(dataset)
    return datasets


def find_dataset(source: str | None, ref: str) -> Dataset:
    source = source or os.environ.get(REGISTRY_ENV)
    if not source:
        raise RegistryError(f"{ref}: a dataset by name needs a registry: --registry FILE_OR_URL "
                            f"(or the {REGISTRY_ENV} setting)")
    name, _, version = ref.rpartition("@")
    datasets = read_registry(source)
    for dataset in datasets:
        if dataset.name == name and dataset.version == version:
            if not dataset.tasks:
                raise RegistryError(f"{source}: dataset {ref} has no tasks")
            return dataset
    have = sorted({d.ref for d in datasets if d.name == name}) or sorted({d.ref for d in datasets})[:10]
    raise RegistryError(f"{source}: no dataset {ref}; it has: {', '.join(have) or 'none'}")


def _read(source: str) -> str:
    parsed = urlparse(source)
    if parsed.scheme in ("http", "https"):
        import urllib.request

        try:
            with urllib.request.urlopen(source, timeout=30) as response:  # noqa: S310 (the user's URL)
                return response.read().decode()
        except OSError as exc:
            raise RegistryError(f"{source}: cannot be read ({exc})") from None
    path = Path(parsed.path if parsed.scheme == "file" else source).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
