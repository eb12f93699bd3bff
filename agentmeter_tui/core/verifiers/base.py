"""The verifier interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sandboxes.base import SandboxSession
    from ..suites import Task


@dataclass
class VerifierResult:
    passed: bool
    quality: float  # R in [0, 1]
    output: str = ""  # what the reviewer reads beside the transcript
    exit_code: int | None = None
    details: dict[str, Any] = field(default_factory=dict)  # kind-specific (the differential funnel, ...)
    infra_error: str | None = None  # our side failed: the trial is infra-invalid, not failed


class Verifier(ABC):
    """Runs after the agent stops, in the trial's sandbox (``session.exec``)."""

    kind: str

    def __init__(self, task: Task):
        self.task = task

    @abstractmethod
    async def verify(self, session: SandboxSession) -> VerifierResult: ...
