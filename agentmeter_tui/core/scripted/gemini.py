"""Gemini (``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent`` and
``:countTokens``).

Used by Gemini CLI. Usage semantics (``usageMetadata``): ``promptTokenCount`` includes
``cachedContentTokenCount``; ``candidatesTokenCount`` excludes ``thoughtsTokenCount``;
``totalTokenCount`` = prompt + candidates + thoughts. Gemini has no field for cache writes,
so they are reported inside ``promptTokenCount`` (a client sees them as uncached input).
Thoughts are parts with ``thought: true``; tool calls are ``functionCall`` parts.
``streamGenerateContent`` answers SSE with ``alt=sse`` and a JSON array without it.
"""

from __future__ import annotations

import re
from typing import Any

from ..wire.gemini import to_gemini as gemini_usage
from .replies import OfferedTool, Reply, text_pieces
from .protocol import DEFAULT_MODELS, ScriptedProtocol, ScriptedRequest, count_tokens, sse

# The routes the server answered for Gemini (aiohttp's {target} is one path segment).
_LISTING = re.compile(r"/v1(?:beta|alpha)/models")
_MODEL_INFO = re.compile(r"/v1(?:beta|alpha)/models/([^/]+)")
_MODEL_POST = re.compile(r"/v1(?:beta|alpha)?/models/([^/]+)")


def split_target(target: str) -> tuple[str, str]:
    """``gemini-2.5-pro:streamGenerateContent`` -> (model, action)."""
    model, _, action = target.rpartition(":")
    return (model, action) if model else (target, "")


class ScriptedGemini(ScriptedProtocol):
    name = "gemini"

    def offered_tools(self, body: dict[str, Any]) -> list[OfferedTool]:
        tools = []
        for group in body.get("tools") or []:
            if not isinstance(group, dict):
                continue
            for decl in group.get("functionDeclarations") or group.get("function_declarations") or []:
                if isinstance(decl, dict) and decl.get("name"):
                    schema = decl.get("parametersJsonSchema") or decl.get("parameters")
                    tools.append(OfferedTool(decl["name"], schema))
        return tools

    def wanted_json(self, body: dict[str, Any]) -> dict[str, Any] | None:
        # Gemini CLI's loop check (after ~30 calls) asks another model for a JSON verdict.
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if isinstance(schema, dict):
            return schema
        return {} if config.get("responseMimeType") == "application/json" else None

    def model(self, req: ScriptedRequest) -> str:
        return split_target(req.match.get("target", ""))[0] or "scripted-model"

    @staticmethod
    def action(req: ScriptedRequest) -> str:
        return split_target(req.match.get("target", ""))[1]

    def wants_stream(self, req: ScriptedRequest) -> bool:
        return self.action(req) == "streamGenerateContent" and req.query.get("alt") == "sse"

    @staticmethod
    def _parts(reply: Reply, streamed: bool) -> list[dict[str, Any]]:
        def cut(text: str | None) -> list[str]:
            return text_pieces(text or "") if streamed else ([text] if text else [])

        parts: list[dict[str, Any]] = [{"text": piece, "thought": True} for piece in cut(reply.reasoning)]
        parts += [{"text": piece} for piece in cut(reply.text)]
        if reply.tool_call is not None:
            call = reply.tool_call
            parts.append({"functionCall": {"id": call.call_id, "name": call.name, "args": call.arguments}})
        return parts or [{"text": ""}]

    def chunks(self, reply: Reply, model: str) -> list[dict[str, Any]]:
        """Streamed chunks: a part each; the last carries finishReason and usageMetadata."""
        chunks = [self._chunk(reply, model, [part]) for part in self._parts(reply, streamed=True)]
        self._finish(chunks[-1], reply)
        return chunks

    @staticmethod
    def _finish(chunk: dict[str, Any], reply: Reply) -> dict[str, Any]:
        chunk["candidates"][0]["finishReason"] = "STOP"
        chunk["usageMetadata"] = gemini_usage(reply.usage)
        return chunk

    @staticmethod
    def _chunk(reply: Reply, model: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
                "modelVersion": model, "responseId": f"resp_{reply.message_id}"}

    def stream(self, reply: Reply, model: str, req: ScriptedRequest) -> list[bytes]:
        return [sse(chunk) for chunk in self.chunks(reply, model)]

    def complete(self, reply: Reply, model: str, req: ScriptedRequest) -> Any:
        if self.action(req) == "streamGenerateContent":  # without alt=sse: a JSON array of chunks
            return self.chunks(reply, model)
        return self._finish(self._chunk(reply, model, self._parts(reply, streamed=False)), reply)

    def path_match(self, path: str) -> dict[str, str]:
        return {"target": path.rsplit("/models/", 1)[-1]}

    def side_answer(self, method: str, path: str, raw: bytes) -> tuple[str, Any] | None:
        if method == "GET" and _LISTING.fullmatch(path):
            return "model list", {"models": [model_info(name) for name in DEFAULT_MODELS]}
        if method == "GET" and (found := _MODEL_INFO.fullmatch(path)):
            return "model info", model_info(found[1])
        if method == "POST" and (found := _MODEL_POST.fullmatch(path)) and split_target(found[1])[1] == "countTokens":
            return "count tokens", {"totalTokens": count_tokens(raw)}
        return None


def model_info(name: str) -> dict[str, Any]:
    return {"name": f"models/{name}", "displayName": name, "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
            "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"]}
