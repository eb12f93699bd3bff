"""Gemini (``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``).

Usage (``usageMetadata``): ``promptTokenCount`` = N+H+A, ``cachedContentTokenCount`` = H, and
no cache-write field, so writes land in uncached input; ``candidatesTokenCount`` = Y,
``thoughtsTokenCount`` = R (extra to candidates). Every streamed chunk repeats the running
totals; the one with a ``finishReason`` has the final ones (else the last seen, when the
stream ends cleanly). A non-streaming ``streamGenerateContent`` answers a JSON array of chunks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..usage import TokenUsage
from .base import WireProtocol, as_int

if TYPE_CHECKING:
    from .base import UsageScanner  # the protocol the base class names (proxy.scan has the one there is)

_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def from_gemini(metadata: Mapping[str, Any]) -> TokenUsage:
    """Gemini ``usageMetadata``: the prompt includes the cache; thoughts are extra to candidates.
    Tool-use prompt tokens are billed as input, so they count as uncached input."""
    prompt = as_int(metadata.get("promptTokenCount")) + as_int(metadata.get("toolUsePromptTokenCount"))
    return TokenUsage.from_inclusive(
        input_tokens=prompt, cached=as_int(metadata.get("cachedContentTokenCount")),
        output_tokens=as_int(metadata.get("candidatesTokenCount")), reasoning=as_int(metadata.get("thoughtsTokenCount")),
        output_includes_reasoning=False)


def to_gemini(usage: TokenUsage) -> dict[str, Any]:
    prompt = usage.uncached_input + usage.cached_input + usage.cache_write
    total = prompt + usage.output + usage.reasoning
    metadata = {"promptTokenCount": prompt, "candidatesTokenCount": usage.output, "totalTokenCount": total}
    if usage.cached_input:
        metadata["cachedContentTokenCount"] = usage.cached_input
    if usage.reasoning:
        metadata["thoughtsTokenCount"] = usage.reasoning
    return metadata


class Gemini(WireProtocol):
    name = "gemini"
    provider_kind = "gemini"
    family = "gemini"
    default_upstream = "https://generativelanguage.googleapis.com"
    scripted = "agentmeter_tui.core.scripted.gemini:ScriptedGemini"
    merged: ClassVar[dict[str, str]] = {"cache_write": "uncached_input"}
    key_headers = ("x-goog-api-key",)
    key_query = ("key",)
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    totals_at_end = True
    _MODEL = r"/v1(?:beta|alpha)?/models/[A-Za-z0-9][A-Za-z0-9._-]*"
    model_paths = (_MODEL + r":(?:generateContent|streamGenerateContent)",)
    side_paths = (("GET", r"/v1(?:beta|alpha)?/models"), ("GET", _MODEL), ("POST", _MODEL + r":countTokens"))

    def matches(self, path: str) -> bool:
        return "/models/" in path and path.endswith((":generateContent", ":streamGenerateContent"))

    def request_model(self, path: str, body: bytes) -> str | None:
        return path.rsplit("/models/", 1)[-1].split(":", 1)[0] or None  # named in the path, not the body

    def error_body(self, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
        code = error_type or _STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        return {"error": {"code": status, "message": message, "status": code}}

    def read_usage(self, usage: Mapping[str, Any]) -> TokenUsage:
        return from_gemini(usage)

    def write_usage(self, usage: TokenUsage) -> dict[str, Any]:
        return to_gemini(usage)

    def holds_running_totals(self, payload: bytes) -> bool:
        return b'"finishReason"' not in payload and b'"error' not in payload

    def frame(self, scan: UsageScanner, obj: dict[str, Any]) -> None:
        if isinstance(obj.get("usageMetadata"), Mapping):
            usage = from_gemini(obj["usageMetadata"])
            candidates = obj.get("candidates") or []
            if any(isinstance(c, Mapping) and c.get("finishReason") for c in candidates):
                scan.set_final(usage)
            else:
                scan.set_partial(usage)

    def whole(self, scan: UsageScanner, obj: Any) -> None:
        chunks = obj if isinstance(obj, list) else [obj]
        found = [c["usageMetadata"] for c in chunks if isinstance(c, Mapping)
                 and isinstance(c.get("usageMetadata"), Mapping)]
        if found:
            scan.set_final(from_gemini(found[-1]))
