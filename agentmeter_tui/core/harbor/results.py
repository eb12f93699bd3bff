"""Harbor's job and trial result files (``result.json``), as pydantic models.

Written from Harbor's documentation of ``TrialResult`` and the files a real ``harbor run``
(harbor 0.26.0) writes, see tests/fixtures/harbor-jobs/. Lenient where Harbor versions
differ; every field we do not name is kept (``extra="allow"``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ..interop.atif_schema import Count, Money


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class Timing(_Lenient):
    started_at: str | None = None
    finished_at: str | None = None


class ExceptionInfo(_Lenient):
    exception_type: str
    exception_message: str = ""
    occurred_at: str | None = None


class ModelInfo(_Lenient):
    name: str
    provider: str | None = None


class AgentInfo(_Lenient):
    name: str
    version: str | None = None
    model_info: ModelInfo | None = None


class AgentContext(_Lenient):
    """Harbor's usage: ``n_input_tokens`` counts the cached tokens too; no cache writes and no
    reasoning count of their own."""

    n_input_tokens: Count | None = None
    n_cache_tokens: Count | None = None
    n_output_tokens: Count | None = None
    cost_usd: Money | None = None
    model_usage: dict[str, dict[str, Any]] | None = None


# A reward is a number in [0, 1], given as a number: 5.0, Infinity, NaN and "1" would each
# count as a pass (or more) in the suite's table, so the trial is refused and named instead.
Reward = Annotated[float, Field(strict=True, ge=0, le=1, allow_inf_nan=False)]


class VerifierResult(_Lenient):
    rewards: dict[str, Reward | None] | None = None


class StepResult(_Lenient):
    step_name: str
    agent_result: AgentContext | None = None
    verifier_result: VerifierResult | None = None
    exception_info: ExceptionInfo | None = None
    agent_execution: Timing | None = None
    verifier: Timing | None = None


class TrialResult(_Lenient):
    id: str | None = None
    task_name: str
    trial_name: str
    source: str | None = None
    config: dict[str, Any] | None = None
    agent_info: AgentInfo
    agent_result: AgentContext | None = None
    verifier_result: VerifierResult | None = None
    exception_info: ExceptionInfo | None = None
    started_at: str | None = None
    finished_at: str | None = None
    environment_setup: Timing | None = None
    agent_setup: Timing | None = None
    agent_execution: Timing | None = None
    verifier: Timing | None = None
    step_results: list[StepResult] | None = None

    @property
    def model_name(self) -> str | None:
        """The model as the job asked for it (``openai/gpt-4o-mini``), else as Harbor recorded it."""
        agent = (self.config or {}).get("agent") or {}
        if isinstance(agent.get("model_name"), str) and agent["model_name"]:
            return agent["model_name"]
        info = self.agent_info.model_info
        if info is None:
            return None
        return f"{info.provider}/{info.name}" if info.provider else info.name

    def contexts(self) -> list[AgentContext]:
        """The usage records: the trial's, or one per step for multi-step trials."""
        if self.agent_result is not None:
            return [self.agent_result]
        return [s.agent_result for s in self.step_results or [] if s.agent_result is not None]

    def rewards(self) -> dict[str, float] | None:
        """The trial's rewards; a multi-step trial's come from its last step that has some."""
        found = self.verifier_result.rewards if self.verifier_result else None
        if not found:
            for step in reversed(self.step_results or []):
                if step.verifier_result is not None and step.verifier_result.rewards:
                    found = step.verifier_result.rewards
                    break
        if not found:
            return None
        return {k: float(v) for k, v in found.items() if v is not None}

    def exceptions(self) -> list[ExceptionInfo]:
        found = [self.exception_info] if self.exception_info else []
        return found + [s.exception_info for s in self.step_results or [] if s.exception_info]


class JobConfig(_Lenient):
    job_name: str | None = None
