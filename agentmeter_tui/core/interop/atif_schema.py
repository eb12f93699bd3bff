"""ATIF, the Agent Trajectory Interchange Format (Harbor's RFC 0001), as pydantic models.

Written from the RFC and Harbor's documentation, versions ATIF-v1.0 to v1.8. Reading is
lenient where versions differ (``session_id`` was required up to v1.6, ``agent.version`` is
sometimes missing in the wild) and keeps every field we do not know (``extra="allow"``), so
a file from a newer producer is read, not refused. What makes a file *not* ATIF is refused:
no ``schema_version`` of the form ``ATIF-v1.N``, no agent, no steps, a step without a
``step_id`` or with a source other than system, user or agent.

Our writer (:mod:`.atif_build`) fills only fields that Harbor's own (strict, ``extra``
forbidding) model has in :data:`LATEST`, so the files we write validate there too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..usage import COUNT_MAX

LATEST = "ATIF-v1.8"
_VERSION = re.compile(r"^ATIF-v1\.(\d+)$")
# A token count: what the store can hold, never negative (a file may claim 10**25 or -5).
# Strict: a count given as a string ("5000") is not a count, however it reads.
Count = Annotated[int, Field(strict=True, ge=0, le=COUNT_MAX)]
Money = Annotated[float, Field(strict=True, allow_inf_nan=False)]
# Token counts producers put in ``metrics.extra`` (``final_metrics.extra`` with ``total_``;
# ``agentmeter_tokens`` is our own exports' five classes). The keys writers in the wild use,
# each read in the writer's own code: Harbor's
# installed agents, src/harbor/agents/installed/*.py of harbor-framework/harbor as the PyPI wheel
# harbor==0.26.0 ships them (gemini_cli.py also read at ayush-or/harbor, a fork, commit
# 9dd79c468f6038526164a6d65c6dc0bdfc3a724a):
# - ``cache_creation_input_tokens``: claude_code.py (``_build_metrics``: prompt = input + cache
#   reads + cache writes, the writes kept in extra);
# - ``cache_write_input_tokens``, ``reasoning_output_tokens``: codex.py
#   (``_metrics_from_token_count_payload``; its ``final_metrics.extra`` has
#   ``reasoning_output_tokens`` and ``total_cache_write_input_tokens``);
# - ``cache_write_tokens``, ``reasoning_tokens``: copilot_cli.py;
# - ``thoughts_tokens``, ``tool_tokens``: gemini_cli.py (``_convert_gemini_to_atif``: the session
#   file's ``tokens.thoughts`` and ``tokens.tool``, both added into ``completion_tokens``, while
#   ``final_metrics`` keeps only the three totals).
CACHE_WRITE_KEYS = ("cache_creation_input_tokens", "cache_write_input_tokens", "cache_write_tokens")
REASONING_KEYS = ("reasoning_output_tokens", "reasoning_tokens", "thoughts_tokens")
# Gemini's tool-use prompt tokens (``toolUsePromptTokenCount``) are input the model read, which
# Harbor's gemini-cli writer adds into completion_tokens: read back as uncached input.
PROMPT_IN_COMPLETION_KEYS = ("tool_tokens",)
_EXTRA_COUNTS = frozenset(CACHE_WRITE_KEYS + REASONING_KEYS + PROMPT_IN_COMPLETION_KEYS)


def _check_extra_counts(extra: dict[str, Any] | None) -> dict[str, Any] | None:
    """The counts we read from ``extra`` are counts: strict integers in range, or absent."""
    from ..usage import count_problem

    for key, value in (extra or {}).items():
        values = value.items() if key == "agentmeter_tokens" and isinstance(value, dict) else \
            [(key, value)] if key.removeprefix("total_") in _EXTRA_COUNTS and value is not None else []
        for name, count in values:
            if problem := count_problem(name, count):
                raise ValueError(problem.replace(f"field '{name}': ", f"extra.{name}: "))
    return extra


class AtifModel(BaseModel):
    model_config = ConfigDict(extra="allow")

    def unknown(self) -> dict[str, Any]:
        """The fields this version of the format does not define, kept verbatim."""
        return dict(self.model_extra or {})


class ContentPart(AtifModel):
    """Multimodal content (v1.6+): a text part, or an image/audio reference."""

    type: str
    text: str | None = None
    source: dict[str, Any] | None = None


Content = str | list[ContentPart]


def content_text(content: Content | None) -> str:
    """The text of a message or an observation: strings as they are, parts' text joined,
    media parts named by their type and path (never fetched)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part.text is not None:
            parts.append(part.text)
        elif part.source:
            parts.append(f"[{part.type}: {part.source.get('path', '')}]")
    return "\n".join(parts)


class ToolCall(AtifModel):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    extra: dict[str, Any] | None = None


class ObservationResult(AtifModel):
    source_call_id: str | None = None
    content: Content | None = None
    subagent_trajectory_ref: list[dict[str, Any]] | dict[str, Any] | None = None
    extra: dict[str, Any] | None = None


class Observation(AtifModel):
    results: list[ObservationResult] = Field(default_factory=list)


class Metrics(AtifModel):
    prompt_tokens: Count | None = None  # all input, cached included (clarified in v1.2)
    completion_tokens: Count | None = None  # everything generated, reasoning included
    cached_tokens: Count | None = None  # the part of prompt_tokens read from a cache
    cost_usd: Money | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None

    _counts = field_validator("extra")(_check_extra_counts)


class Step(AtifModel):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: Content = ""
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    is_copied_context: bool | None = None
    llm_call_count: int | None = None
    extra: dict[str, Any] | None = None


class Agent(AtifModel):
    name: str
    version: str | None = None
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    extra: dict[str, Any] | None = None


class FinalMetrics(AtifModel):
    total_prompt_tokens: Count | None = None
    total_completion_tokens: Count | None = None
    total_cached_tokens: Count | None = None
    total_cost_usd: Money | None = None
    total_steps: int | None = None
    extra: dict[str, Any] | None = None

    _counts = field_validator("extra")(_check_extra_counts)


class Trajectory(AtifModel):
    schema_version: str
    session_id: str | None = None
    trajectory_id: str | None = None
    agent: Agent
    steps: list[Step] = Field(min_length=1)
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    continued_trajectory_ref: str | None = None
    extra: dict[str, Any] | None = None
    subagent_trajectories: list[Trajectory] | None = None

    @field_validator("schema_version")
    @classmethod
    def _known_major(cls, value: str) -> str:
        if not _VERSION.match(value):
            raise ValueError(f"not an ATIF version: {value!r} (expected ATIF-v1.N)")
        return value

    @property
    def minor(self) -> int:
        match = _VERSION.match(self.schema_version)
        assert match is not None  # the field's validator let no other spelling in
        return int(match.group(1))

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_json_dict(), option=orjson.OPT_INDENT_2)


class AtifError(ValueError):
    """A file that is not a readable ATIF trajectory, with where and why."""

    def __init__(self, source: str, message: str):
        self.source = source
        super().__init__(f"{source}: {message}")


def parse_trajectory(data: bytes | str | dict, source: str = "<input>") -> Trajectory:
    """Parse one trajectory; :class:`AtifError` names the first wrong field."""
    if not isinstance(data, dict):
        try:
            data = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise AtifError(source, f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise AtifError(source, "expected a JSON object")
    try:
        return Trajectory.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise AtifError(source, f"field '{where}': {first['msg']}") from None


def load_trajectory(path: str | Path) -> Trajectory:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AtifError(str(path), exc.strerror or str(exc)) from None
    return parse_trajectory(data, str(path))
