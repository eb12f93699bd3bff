"""Usage objects of the four model APIs, read into and written from the five classes.

One place knows how each wire protocol reports tokens (SPEC section 4, ``docs/scenarios.md``
"The five classes on each wire"): the metering proxy and adapters read usage with the
``from_*`` functions, the scripted model server writes it with the ``to_*`` functions, and a
test proves each pair round-trips. Where a protocol cannot tell two classes apart,
:data:`MERGED` says which class absorbs which, and :func:`fold` applies that to a
five-class figure so that like is compared with like.

With N uncached input, H cache reads, A cache writes, Y output and R reasoning:

| protocol | input | output |
| --- | --- | --- |
| chat | ``prompt_tokens`` = N+H+A, details ``cached_tokens`` = H, ``cache_write_tokens`` = A | ``completion_tokens`` = Y+R, details ``reasoning_tokens`` = R |
| anthropic | ``input_tokens`` = N, ``cache_read_input_tokens`` = H, ``cache_creation_input_tokens`` = A | ``output_tokens`` = Y+R (no reasoning count) |
| responses | ``input_tokens`` = N+H+A, details ``cached_tokens`` = H, ``cache_write_tokens`` = A | ``output_tokens`` = Y+R, details ``reasoning_tokens`` = R |
| gemini | ``promptTokenCount`` = N+H+A, ``cachedContentTokenCount`` = H (no cache-write field) | ``candidatesTokenCount`` = Y, ``thoughtsTokenCount`` = R |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from .usage import TokenUsage

#: per protocol, the classes its usage object cannot report apart: {folded class: the class it lands in}
MERGED: dict[str, dict[str, str]] = {
    "chat": {},
    "anthropic": {"reasoning": "output"},
    "responses": {},
    "gemini": {"cache_write": "uncached_input"},
}


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def fold(usage: TokenUsage, merged: Mapping[str, str]) -> TokenUsage:
    """``usage`` as a reader that cannot tell the ``merged`` classes apart would see it."""
    counts = usage.as_dict()
    for source, target in merged.items():
        counts[target] += counts[source]
        counts[source] = 0
    return TokenUsage(**counts)


# -- readers -----------------------------------------------------------------------------------

def from_chat(usage: Mapping[str, Any]) -> TokenUsage:
    """OpenAI Chat Completions ``usage`` and the providers that extend it (docs/proxy.md, "Providers"):
    DeepSeek's ``prompt_cache_hit_tokens``, Moonshot's top-level ``cached_tokens``, OpenRouter's
    ``prompt_tokens_details.cache_write_tokens`` and DashScope's explicit-cache
    ``cache_creation_input_tokens`` (DashScope may send both with the same value: one write)."""
    prompt = _map(usage.get("prompt_tokens_details"))
    completion = _map(usage.get("completion_tokens_details"))
    cached = _int(prompt.get("cached_tokens") or usage.get("prompt_cache_hit_tokens") or usage.get("cached_tokens"))
    write = _int(prompt.get("cache_write_tokens") or prompt.get("cache_creation_input_tokens"))
    return TokenUsage.from_inclusive(
        input_tokens=_int(usage.get("prompt_tokens")), cached=cached, cache_write=write,
        output_tokens=_int(usage.get("completion_tokens")), reasoning=_int(completion.get("reasoning_tokens")),
        cache_write_1h=_int(_map(prompt.get("cache_creation")).get("ephemeral_1h_input_tokens")))


def from_anthropic(usage: Mapping[str, Any]) -> TokenUsage:
    """Anthropic Messages ``usage``: input excludes the cache; thinking is inside output; the
    1-hour share of the cache writes is ``cache_creation.ephemeral_1h_input_tokens``."""
    write = _int(usage.get("cache_creation_input_tokens"))
    return TokenUsage(uncached_input=_int(usage.get("input_tokens")),
                      cached_input=_int(usage.get("cache_read_input_tokens")),
                      cache_write=write,
                      output=_int(usage.get("output_tokens")),
                      cache_write_1h=min(write, _int(_map(usage.get("cache_creation")).get("ephemeral_1h_input_tokens"))))


def charged_usd(usage: Mapping[str, Any]) -> Decimal | None:
    """What the provider says it charged for the call, in USD, where the wire carries it:
    OpenRouter's ``usage.cost`` (credits, 1 credit = 1 USD). With ``is_byok`` the provider bills
    the key's owner directly and ``cost`` is only OpenRouter's fee, so the upstream inference
    cost (``cost_details.upstream_inference_cost``) is added."""
    cost = usage.get("cost")
    if isinstance(cost, bool) or not isinstance(cost, (int, float, str)):
        return None
    try:
        total = Decimal(str(cost))
        if usage.get("is_byok"):
            upstream = _map(usage.get("cost_details")).get("upstream_inference_cost")
            if isinstance(upstream, (int, float, str)) and not isinstance(upstream, bool):
                total += Decimal(str(upstream))
    except ArithmeticError:
        return None
    return total


def from_responses(usage: Mapping[str, Any]) -> TokenUsage:
    """OpenAI Responses ``usage``: input includes cache reads and writes, output includes reasoning."""
    details = _map(usage.get("input_tokens_details"))
    return TokenUsage.from_inclusive(
        input_tokens=_int(usage.get("input_tokens")), cached=_int(details.get("cached_tokens")),
        cache_write=_int(details.get("cache_write_tokens")), output_tokens=_int(usage.get("output_tokens")),
        reasoning=_int(_map(usage.get("output_tokens_details")).get("reasoning_tokens")))


def from_gemini(metadata: Mapping[str, Any]) -> TokenUsage:
    """Gemini ``usageMetadata``: the prompt includes the cache; thoughts are extra to candidates.
    Tool-use prompt tokens are billed as input, so they count as uncached input."""
    prompt = _int(metadata.get("promptTokenCount")) + _int(metadata.get("toolUsePromptTokenCount"))
    return TokenUsage.from_inclusive(
        input_tokens=prompt, cached=_int(metadata.get("cachedContentTokenCount")),
        output_tokens=_int(metadata.get("candidatesTokenCount")), reasoning=_int(metadata.get("thoughtsTokenCount")),
        output_includes_reasoning=False)


READERS: dict[str, Callable[[Mapping[str, Any]], TokenUsage]] = {
    "chat": from_chat, "anthropic": from_anthropic, "responses": from_responses, "gemini": from_gemini}


# -- writers (the scripted model server) ---------------------------------------------------------

def to_chat(usage: TokenUsage) -> dict[str, Any]:
    prompt = usage.uncached_input + usage.cached_input + usage.cache_write
    completion = usage.output + usage.reasoning
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        # cache_write_tokens is not an OpenAI field: our addition, so writes show on this protocol at all
        "prompt_tokens_details": {"cached_tokens": usage.cached_input, "cache_write_tokens": usage.cache_write},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
    }


def to_anthropic(usage: TokenUsage, output_tokens: int) -> dict[str, Any]:
    """``output_tokens`` is passed in: ``message_start`` says 1, ``message_delta`` the final count."""
    return {
        "input_tokens": usage.uncached_input,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cached_input,
        "cache_creation": {"ephemeral_5m_input_tokens": usage.cache_write - usage.cache_write_1h,
                           "ephemeral_1h_input_tokens": usage.cache_write_1h},
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


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


def to_gemini(usage: TokenUsage) -> dict[str, Any]:
    prompt = usage.uncached_input + usage.cached_input + usage.cache_write
    total = prompt + usage.output + usage.reasoning
    metadata = {"promptTokenCount": prompt, "candidatesTokenCount": usage.output, "totalTokenCount": total}
    if usage.cached_input:
        metadata["cachedContentTokenCount"] = usage.cached_input
    if usage.reasoning:
        metadata["thoughtsTokenCount"] = usage.reasoning
    return metadata

