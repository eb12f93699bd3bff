"""Scenario files of the scripted model server: the pydantic models and :func:`load_scenario`.

A scenario is a TOML file of scripted turns; each model call of a session consumes the next
turn (``docs/scenarios.md`` is the user's reference). Loading validates the file and turns
every problem into an :class:`~agentmeter_tui.core.tomlerrors.InputError` naming file, line
and field. Loaded files are cached by (path, mtime, size) because every trial of a suite
registers the same few scenarios.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, model_validator

from ..tomlerrors import load_toml, parse_toml, validate
from ..usage import TokenUsage


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # TOML is typed: no coercion


class ScriptedUsage(_Strict):
    """The five disjoint token classes a turn reports; a missing class is 0."""

    uncached_input: NonNegativeInt = 0
    cached_input: NonNegativeInt = 0
    cache_write: NonNegativeInt = 0
    output: NonNegativeInt = 0
    reasoning: NonNegativeInt = 0
    # the share of cache_write that goes to a 1-hour cache (sent as Anthropic's ephemeral_1h_input_tokens)
    cache_write_1h: NonNegativeInt = 0

    @model_validator(mode="after")
    def _share(self) -> ScriptedUsage:
        if self.cache_write_1h > self.cache_write:
            raise ValueError("cache_write_1h is a share of cache_write: it cannot be larger")
        return self

    def tokens(self) -> TokenUsage:
        return TokenUsage(**self.model_dump())


# Deterministic figures for calls a scenario does not script (documented in docs/scenarios.md).
DEFAULT_USAGE = TokenUsage(uncached_input=100, output=20)  # a turn without `usage`; "Done." after the end
SIDE_CALL_USAGE = TokenUsage(uncached_input=20, output=5)  # a call that offers no tools (titles etc.)


class NamedTool(_Strict):
    """A call of a named tool with the arguments exactly as given."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = {}


class ScriptedError(_Strict):
    """Answer with this HTTP error, in the protocol's own error body shape."""

    status: int = Field(ge=400, le=599)
    message: str = "scripted error"
    type: str | None = None  # the protocol's error type; default derived from the status
    retry_after: float | None = Field(None, ge=0)  # seconds, sent as a `retry-after` header


class Turn(_Strict):
    reasoning: str | None = None
    text: str | None = None
    shell: str | None = None
    tool: NamedTool | None = None
    usage: ScriptedUsage | None = None
    delay_ms: NonNegativeInt = 0
    stall_ms: NonNegativeInt = 0
    reset: bool = False  # cut the connection (TCP reset) after the first streamed chunk
    error: ScriptedError | None = None
    repeat: PositiveInt = 1
    loop: bool = False

    @model_validator(mode="after")
    def _coherent(self) -> Turn:
        if self.shell is not None and self.tool is not None:
            raise ValueError("a turn makes at most one tool call: give `shell` or `tool`, not both")
        if self.error is None and not any(
            (self.reasoning, self.text, self.shell, self.tool)
        ):
            raise ValueError("a turn needs at least one of text, reasoning, shell, tool or error")
        return self

    def tokens(self) -> TokenUsage:
        return self.usage.tokens() if self.usage else DEFAULT_USAGE


class Scenario(_Strict):
    description: str = ""
    turns: list[Turn] = []
    # Agents that offer the model no tools and read commands out of its text (Harbor's
    # terminus-2): every call of theirs is a scripted turn, not a side call.
    toolless_turns: bool = False


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; raises ``InputError`` (file, line, field) when bad."""
    path = Path(path)
    try:
        stat = path.stat()
        cache_key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    except OSError:
        cache_key = None
    if cache_key in _CACHE:
        return _CACHE[cache_key]
    data, text = load_toml(path)
    scenario = validate(Scenario, data, path, text)
    if cache_key is not None:
        _CACHE[cache_key] = scenario
    return scenario


def scenario_from_text(text: str, name: str) -> Scenario:
    """A scenario sent as its text (a session registered over HTTP: the server opens no path a
    request names). ``name`` is the file's name, for errors only."""
    cache_key = ("text", hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest())
    if cache_key in _CACHE:
        return _CACHE[cache_key]
    scenario = validate(Scenario, parse_toml(text, name), Path(name), text)
    _CACHE[cache_key] = scenario
    return scenario


_CACHE: dict[tuple, Scenario] = {}
