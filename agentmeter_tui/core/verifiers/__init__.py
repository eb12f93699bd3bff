"""Verifiers judge a trial after its agent stops. Looked up by the task's ``[verifier] kind``."""

from __future__ import annotations

from ..registry import LazyRegistry
from .base import Verifier, VerifierResult

VERIFIERS: LazyRegistry[Verifier] = LazyRegistry("verifier", {
    "command": "agentmeter_tui.core.verifiers.command:CommandVerifier",
    "differential": "agentmeter_tui.core.verifiers.differential:DifferentialVerifier",
    "none": "agentmeter_tui.core.verifiers.command:NoVerifier",
    "harbor": "agentmeter_tui.core.verifiers.harbor:HarborVerifier",
})

__all__ = ["VERIFIERS", "Verifier", "VerifierResult"]
