"""Workspace snapshots and side-effect diffs.

A snapshot maps every visible path under a folder to a fingerprint of its content (sha256 for
files, a marker for folders, the target for symlinks). Paths with any part starting with ``.``
are left out: tools leave caches and temporary files there (seed 001, section 2.3.3, the
ignored set), and they must never make a case fail. The diff of two snapshots is the case's
side effect: what was created, modified and deleted, compared by content, never by time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# One implementation wherever a case runs: the batch runner a sandbox executes is stdlib-only,
# so the fingerprinting lives there and this module re-exports it.
from .batchrun import DIR, is_hidden, snapshot

__all__ = ["DIR", "SideEffects", "is_hidden", "snapshot"]


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
