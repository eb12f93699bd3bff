"""Harbor's task format: a ``task.toml`` that follows Harbor's contract, and telling one apart.

Harbor's tasks (Terminal-Bench 2 ``version = "2.0"``, Harbor templates ``schema_version = "1.x"``,
or ``[verifier] kind = "harbor"``) have the tables of our own (``suites/taskfolders.py``), but
every table keeps keys we do not know: Harbor grows its schema, and a dataset written for a
newer Harbor must still load. Their verifier is ``tests/test.sh`` writing
``/logs/verifier/reward.txt|json`` (``verifier.py``).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from ..suites.taskfolders import TaskFile, TaskSection, VerifierSection

HARBOR = "harbor"


class HarborTaskSection(TaskSection):
    model_config = ConfigDict(extra="allow")


class HarborVerifierSection(VerifierSection):
    kind: str = HARBOR


class HarborTaskFile(TaskFile):
    """A Harbor task.toml: the same tables, every one keeping keys we do not know."""

    model_config = ConfigDict(extra="allow")

    task: HarborTaskSection = HarborTaskSection()
    verifier: HarborVerifierSection = HarborVerifierSection()


def is_harbor(data: dict[str, Any]) -> bool:
    """Whether a parsed task.toml follows Harbor's contract (module docstring)."""
    verifier = sub if isinstance(sub := data.get("verifier"), dict) else {}
    kind = verifier.get("kind")
    if kind is not None:
        return kind == HARBOR
    return "version" in data or "schema_version" in data
