"""OpenAI Responses (``POST /v1/responses``).

Usage: ``input_tokens`` = N+H+A, details ``cached_tokens`` = H and ``cache_write_tokens`` = A;
``output_tokens`` = Y+R, details ``reasoning_tokens`` = R. In a stream the usage is in the
``response`` of ``response.completed`` / ``incomplete`` / ``failed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..usage import TokenUsage
from .base import as_int, as_map
from .chat import OpenAIFamily

if TYPE_CHECKING:
    from .base import UsageScanner  # the protocol the base class names (proxy.scan has the one there is)


def from_responses(usage: Mapping[str, Any]) -> TokenUsage:
    """OpenAI Responses ``usage``: input includes cache reads and writes, output includes reasoning."""
    details = as_map(usage.get("input_tokens_details"))
    return TokenUsage.from_inclusive(
        input_tokens=as_int(usage.get("input_tokens")), cached=as_int(details.get("cached_tokens")),
        cache_write=as_int(details.get("cache_write_tokens")), output_tokens=as_int(usage.get("output_tokens")),
        reasoning=as_int(as_map(usage.get("output_tokens_details")).get("reasoning_tokens")))


def to_responses(usage: TokenUsage) -> dict[str, Any]:
    input_tokens = usage.uncached_input + usage.cached_input + usage.cache_write
    output_tokens = usage.output + usage.reasoning
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input, "cache_write_tokens": usage.cache_write},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


class Responses(OpenAIFamily):
    name = "responses"
    provider_kind = "openai"
    scripted = "agentmeter_tui.core.scripted.responses:ScriptedResponses"
    model_paths = (r"/v1/responses",)

    def matches(self, path: str) -> bool:
        return path.endswith("/responses")

    def read_usage(self, usage: Mapping[str, Any]) -> TokenUsage:
        return from_responses(usage)

    def write_usage(self, usage: TokenUsage) -> dict[str, Any]:
        return to_responses(usage)

    def frame(self, scan: UsageScanner, obj: dict[str, Any]) -> None:
        response = obj.get("response")
        if isinstance(response, Mapping) and isinstance(response.get("usage"), Mapping):
            scan.set_final(from_responses(response["usage"]))
