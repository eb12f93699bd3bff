"""The verifier interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sandboxes.base import SandboxSession
    from ..suites.suite import Task


@dataclass
class VerifierResult:
    passed: bool
    quality: float  # R in [0, 1]
    output: str = ""  # what the reviewer reads beside the transcript
    exit_code: int | None = None
    details: dict[str, Any] = field(default_factory=dict)  # kind-specific (the differential funnel, ...)
    infra_error: str | None = None  # our side failed: the trial is infra-invalid, not failed
    reason: str | None = None  # why it failed, when that is more than "the tests said no" (shown in review)


class Verifier(ABC):
    """Runs after the agent stops, in the trial's sandbox (``session.exec``)."""

    kind: str

    def __init__(self, task: Task, *, pass_threshold: float = 1.0):
        self.task = task
        self.pass_threshold = pass_threshold  # the suite's, for verifiers whose reward decides the pass
        self.trajectory: bytes | None = None  # the transcript as ATIF, for verifiers that hand it on

    @abstractmethod
    async def verify(self, session: SandboxSession) -> VerifierResult: ...
