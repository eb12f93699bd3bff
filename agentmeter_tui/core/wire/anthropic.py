"""Anthropic Messages (``POST /v1/messages``; ``/v1/messages/count_tokens`` is no model call).

Usage: ``input_tokens`` = N (uncached only), ``cache_read_input_tokens`` = H,
``cache_creation_input_tokens`` = A (its 1-hour share in ``cache_creation``);
``output_tokens`` = Y+R, with no reasoning count, so reasoning lands in output. In a stream
``message_start`` has the input figures and ``output_tokens: 1``, ``message_delta`` the final,
cumulative ones (merged over the start).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..usage import TokenUsage
from .base import WireProtocol, as_int, as_map

if TYPE_CHECKING:
    from .base import UsageScanner  # the protocol the base class names (proxy.scan has the one there is)

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                529: "overloaded_error"}


def from_anthropic(usage: Mapping[str, Any]) -> TokenUsage:
    """Anthropic Messages ``usage``: input excludes the cache; thinking is inside output; the
    1-hour share of the cache writes is ``cache_creation.ephemeral_1h_input_tokens``."""
    write = as_int(usage.get("cache_creation_input_tokens"))
    return TokenUsage(uncached_input=as_int(usage.get("input_tokens")),
                      cached_input=as_int(usage.get("cache_read_input_tokens")),
                      cache_write=write,
                      output=as_int(usage.get("output_tokens")),
                      cache_write_1h=min(write, as_int(as_map(usage.get("cache_creation")).get("ephemeral_1h_input_tokens"))))


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


class AnthropicMessages(WireProtocol):
    name = "anthropic"
    provider_kind = "anthropic"
    family = "anthropic"
    default_upstream = "https://api.anthropic.com"
    scripted = "agentmeter_tui.core.scripted.anthropic:ScriptedAnthropicMessages"
    merged: ClassVar[dict[str, str]] = {"reasoning": "output"}
    base_url_env: ClassVar[dict[str, str]] = {"ANTHROPIC_BASE_URL": ""}
    key_headers = ("x-api-key",)
    key_env = ("ANTHROPIC_API_KEY",)
    key_env_if_set = ("ANTHROPIC_AUTH_TOKEN",)
    model_paths = (r"/v1/messages",)
    side_paths = (("POST", r"/v1/messages/count_tokens"), ("GET", r"/v1/models"),
                  ("GET", r"/v1/models/[A-Za-z0-9][A-Za-z0-9._:~-]*"))

    def matches(self, path: str) -> bool:
        return path.endswith("/messages")

    def error_body(self, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
        kind = error_type or _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def read_usage(self, usage: Mapping[str, Any]) -> TokenUsage:
        return from_anthropic(usage)

    def write_usage(self, usage: TokenUsage) -> dict[str, Any]:
        return to_anthropic(usage, usage.output + usage.reasoning)

    def frame(self, scan: UsageScanner, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if kind == "message_start":
            usage = (obj.get("message") or {}).get("usage")
            if isinstance(usage, Mapping):
                scan.memo["start"] = dict(usage)
                scan.set_partial(from_anthropic(usage))
        elif kind == "message_delta" and isinstance(obj.get("usage"), Mapping):
            merged = {**scan.memo.get("start", {}), **{k: v for k, v in obj["usage"].items() if v is not None}}
            scan.set_final(from_anthropic(merged))
