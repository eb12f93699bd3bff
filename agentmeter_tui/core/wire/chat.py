"""OpenAI Chat Completions (``POST /v1/chat/completions``) and the providers that extend it.

Usage: ``prompt_tokens`` = N+H+A (uncached, cache reads, cache writes), details
``cached_tokens`` = H and ``cache_write_tokens`` = A (our addition, so writes show on this
protocol at all); ``completion_tokens`` = Y+R, details ``reasoning_tokens`` = R. In a stream
the usage is on the chunk with ``usage`` (the last chunk with ``include_usage``, or the
finishing chunk as DeepSeek and GLM send it) or on ``choices[0].usage`` (Moonshot); a usage
object without prompt or completion counts (MiniMax's ``{"total_tokens": 0}`` on every chunk)
is a placeholder, not the call's figures; OpenRouter's ``usage.cost`` is what the call was
charged.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from ..usage import TokenUsage
from .base import WireProtocol, as_int, as_map

if TYPE_CHECKING:
    from .base import UsageScanner  # the protocol the base class names (proxy.scan has the one there is)

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error"}


def openai_error(status: int, message: str, error_type: str | None) -> dict[str, Any]:
    kind = error_type or _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def from_chat(usage: Mapping[str, Any]) -> TokenUsage:
    """OpenAI Chat Completions ``usage`` and the providers that extend it (docs/proxy.md, "Providers"):
    DeepSeek's ``prompt_cache_hit_tokens``, Moonshot's top-level ``cached_tokens``, OpenRouter's
    ``prompt_tokens_details.cache_write_tokens`` and DashScope's explicit-cache
    ``cache_creation_input_tokens`` (DashScope may send both with the same value: one write)."""
    prompt = as_map(usage.get("prompt_tokens_details"))
    completion = as_map(usage.get("completion_tokens_details"))
    cached = as_int(prompt.get("cached_tokens") or usage.get("prompt_cache_hit_tokens") or usage.get("cached_tokens"))
    write = as_int(prompt.get("cache_write_tokens") or prompt.get("cache_creation_input_tokens"))
    return TokenUsage.from_inclusive(
        input_tokens=as_int(usage.get("prompt_tokens")), cached=cached, cache_write=write,
        output_tokens=as_int(usage.get("completion_tokens")), reasoning=as_int(completion.get("reasoning_tokens")),
        cache_write_1h=as_int(as_map(prompt.get("cache_creation")).get("ephemeral_1h_input_tokens")))


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
            upstream = as_map(usage.get("cost_details")).get("upstream_inference_cost")
            if isinstance(upstream, (int, float, str)) and not isinstance(upstream, bool):
                total += Decimal(str(upstream))
    except ArithmeticError:
        return None
    return total


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


class OpenAIFamily(WireProtocol):
    """What Chat Completions and Responses share: OpenAI's upstream, SDK variables and errors."""

    family = "openai"
    default_upstream = "https://api.openai.com"
    base_url_env: ClassVar[dict[str, str]] = {"OPENAI_BASE_URL": "/v1"}
    key_headers = ("api-key",)  # Azure OpenAI; the others send a Bearer token
    key_env = ("OPENAI_API_KEY",)
    key_sources = ("OPENROUTER_API_KEY", "DASHSCOPE_API_KEY")
    side_paths = (("GET", r"/v1/models"), ("GET", r"/v1/models/[A-Za-z0-9][A-Za-z0-9._:~-]*"))

    def error_body(self, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
        return openai_error(status, message, error_type)


class ChatCompletions(OpenAIFamily):
    name = "chat"
    provider_kind = "openai-chat"
    scripted = "agentmeter_tui.core.scripted.chat:ScriptedChatCompletions"
    model_paths = (r"/v1/chat/completions",)

    def matches(self, path: str) -> bool:
        return path.endswith("/chat/completions")

    def read_usage(self, usage: Mapping[str, Any]) -> TokenUsage:
        return from_chat(usage)

    def write_usage(self, usage: TokenUsage) -> dict[str, Any]:
        return to_chat(usage)

    def whole(self, scan: UsageScanner, obj: Any) -> None:
        if not isinstance(obj, Mapping):
            return
        usage = obj.get("usage")
        if not isinstance(usage, Mapping):
            choices = obj.get("choices")
            first = choices[0] if isinstance(choices, list) and choices else None
            usage = first.get("usage") if isinstance(first, Mapping) else None
        if not isinstance(usage, Mapping) or not (usage.get("prompt_tokens") or usage.get("completion_tokens")):
            return  # no usage, or a placeholder
        charged = charged_usd(usage)
        if charged is not None:
            scan.charged = charged
        scan.set_final(from_chat(usage))
