"""Workspace snapshots and side-effect diffs.

A snapshot maps every visible path under a folder to a fingerprint of its content (sha256 for
files, a marker for folders, the target for symlinks). Paths with any part starting with ``.``
are left out: tools leave caches and temporary files there (seed 001, section 2.3.3, the
ignored set), and they must never make a case fail. The diff of two snapshots is the case's
side effect: what was created, modified and deleted, compared by content, never by time.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DIR = "<dir>"


def is_hidden(relpath: str) -> bool:
    return any(part.startswith(".") for part in Path(relpath).parts)


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def snapshot(root: Path) -> dict[str, str]:
    """Relative POSIX path -> fingerprint for everything visible under ``root``."""
    entries: dict[str, str] = {}
    root_str = str(root)
    for folder, dirs, files in os.walk(root_str):
        # Prune hidden folders here so a tool's big cache is never even read.
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel_folder = os.path.relpath(folder, root_str)
        for name in dirs:
            full = os.path.join(folder, name)
            rel = name if rel_folder == "." else f"{rel_folder}/{name}"
            entries[rel] = f"<link>{os.readlink(full)}" if os.path.islink(full) else DIR
        for name in sorted(files):
            if name.startswith("."):
                continue
            full = os.path.join(folder, name)
            rel = name if rel_folder == "." else f"{rel_folder}/{name}"
            if os.path.islink(full):
                entries[rel] = f"<link>{os.readlink(full)}"
            else:
                try:
                    entries[rel] = _file_digest(full)
                except OSError as exc:  # a fifo or a file we may not read: fingerprint the failure
                    entries[rel] = f"<unreadable:{exc.errno}>"
    return entries


@dataclass
class SideEffects:
    """A case's effect on its workspace. ``created``/``modified`` map path -> new fingerprint."""

    created: dict[str, str] = field(default_factory=dict)
    modified: dict[str, str] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)

    @classmethod
    def between(cls, before: dict[str, str], after: dict[str, str]) -> SideEffects:
        return cls(
            created={p: h for p, h in sorted(after.items()) if p not in before},
            modified={p: h for p, h in sorted(after.items()) if p in before and before[p] != h},
            deleted=sorted(p for p in before if p not in after),
        )

    def __bool__(self) -> bool:
        return bool(self.created or self.modified or self.deleted)

    def as_dict(self) -> dict[str, Any]:
        return {"created": dict(self.created), "modified": dict(self.modified), "deleted": list(self.deleted)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SideEffects:
        return cls(created=dict(data.get("created", {})), modified=dict(data.get("modified", {})),
                   deleted=list(data.get("deleted", [])))

    def lines(self) -> list[str]:
        """``+ path`` / ``~ path`` / ``- path`` lines, the way the review screen shows a diff."""
        return ([f"+ {p}" for p in self.created] + [f"~ {p}" for p in self.modified]
                + [f"- {p}" for p in self.deleted])
