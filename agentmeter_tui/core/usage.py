"""Token usage in the five disjoint classes of SPEC section 4.

Every adapter normalizes its CLI's reporting into :class:`TokenUsage`; nothing downstream
ever sees a CLI's raw semantics (inclusive input, output with reasoning inside, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TOKEN_CLASSES: tuple[str, ...] = ("uncached_input", "cached_input", "cache_write", "output", "reasoning")
COUNT_MAX = 2**63 - 1  # the largest count the store (SQLite INTEGER) holds; a file may claim more


def count_problem(name: str, value: object) -> str | None:
    """Why ``value`` is not a token count the store can hold (named ``name``), or None."""
    if not isinstance(value, int) or isinstance(value, bool):
        return f"field '{name}': expected an integer"
    if value < 0:
        return f"field '{name}': {value} is negative"
    if value > COUNT_MAX:
        return f"field '{name}': {value} is more than the store holds (2**63 - 1)"
    return None


# The text of a usage event, the five classes in TokenUsage's order (adapters write it, ATIF
# export compares with it to know whether a step must keep its own text).
USAGE_TEXT = "in {} cached {} write {} out {} reasoning {}"


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Disjoint token counts: their sum is the trial's raw tokens.

    ``cache_write_1h`` is not a sixth class: it is the share of ``cache_write`` that went to a
    1-hour cache (Anthropic-style ``ephemeral_1h_input_tokens``), kept so that share can be
    priced at its own rate and recomputed later. It never adds to ``raw``."""

    uncached_input: int = 0
    cached_input: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0
    cache_write_1h: int = 0

    @property
    def raw(self) -> int:
        return self.uncached_input + self.cached_input + self.cache_write + self.output + self.reasoning

    @property
    def fresh(self) -> int:
        """Tokens that are not cache reads: what a burn-rate meter should show."""
        return self.raw - self.cached_input

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.uncached_input + other.uncached_input,
            self.cached_input + other.cached_input,
            self.cache_write + other.cache_write,
            self.output + other.output,
            self.reasoning + other.reasoning,
            self.cache_write_1h + other.cache_write_1h,
        )

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.uncached_input - other.uncached_input,
            self.cached_input - other.cached_input,
            self.cache_write - other.cache_write,
            self.output - other.output,
            self.reasoning - other.reasoning,
            self.cache_write_1h - other.cache_write_1h,
        )

    def __bool__(self) -> bool:
        return self.raw != 0

    def as_dict(self) -> dict[str, int]:
        # Spelled out rather than dataclasses.fields(): this runs once per usage event.
        return {"uncached_input": self.uncached_input, "cached_input": self.cached_input,
                "cache_write": self.cache_write, "output": self.output, "reasoning": self.reasoning}

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        return (self.uncached_input, self.cached_input, self.cache_write, self.output, self.reasoning)

    def text(self) -> str:
        """This figure as a usage event's text (:data:`USAGE_TEXT`)."""
        return USAGE_TEXT.format(*self.as_tuple())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TokenUsage:
        if not data:
            return cls()
        # Spelled out rather than a comprehension over TOKEN_CLASSES into keywords: a site makes
        # one per usage row (half a million in a paper grid), and the dict and keywords were most
        # of its cost. The fields' order is the class's (uncached_input... reasoning).
        get = data.get
        return cls(int(get("uncached_input") or 0), int(get("cached_input") or 0), int(get("cache_write") or 0),
                   int(get("output") or 0), int(get("reasoning") or 0), int(get("cache_write_1h") or 0))

    @classmethod
    def from_inclusive(
        cls,
        *,
        input_tokens: int,
        cached: int = 0,
        cache_write: int = 0,
        output_tokens: int = 0,
        reasoning: int = 0,
        output_includes_reasoning: bool = True,
        cache_write_1h: int = 0,
    ) -> TokenUsage:
        """OpenAI-style figures: input counts cache reads and writes, output may count reasoning.

        A reasoning count larger than the output it is part of (OpenRouter has sent
        ``reasoning_tokens: 11`` in ``completion_tokens: 10``) is capped at that output, so the
        classes still add up to the billed total."""
        if output_includes_reasoning:
            reasoning = min(reasoning, max(0, output_tokens))
        output = output_tokens - reasoning if output_includes_reasoning else output_tokens
        return cls(
            uncached_input=max(0, input_tokens - cached - cache_write),
            cached_input=cached,
            cache_write=cache_write,
            output=max(0, output),
            reasoning=reasoning,
            cache_write_1h=min(cache_write_1h, cache_write),
        )
