"""Anthropic Messages (``POST /v1/messages``, any query string) and ``/v1/messages/count_tokens``.

Used by Claude Code (and opencode with ``@ai-sdk/anthropic``). Usage semantics (Anthropic):
``input_tokens`` is the UNCACHED input only, cache reads and writes have their own fields;
``output_tokens`` includes thinking (Anthropic reports no separate reasoning count), so a
client sees output + reasoning there. ``message_start`` carries the input figures with
``output_tokens: 1``; ``message_delta`` carries the final, cumulative figures.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from ..wire.anthropic import to_anthropic as anthropic_usage
from .replies import OfferedTool, Reply, text_pieces
from .protocol import ScriptedProtocol, ScriptedRequest, count_tokens, sse


def _signature(text: str) -> str:
    # Real thinking blocks carry an opaque signature that clients send back; any stable string works.
    return "scripted-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.reasoning:
        blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": _signature(reply.reasoning)})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    if reply.tool_call is not None:
        call = reply.tool_call
        blocks.append({"type": "tool_use", "id": call.call_id.replace("call_", "toolu_", 1),
                       "name": call.name, "input": call.arguments})
    return blocks


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.tool_call is not None else "end_turn"


class ScriptedAnthropicMessages(ScriptedProtocol):
    name = "anthropic"

    def offered_tools(self, body: dict[str, Any]) -> list[OfferedTool]:
        return [OfferedTool(tool["name"], tool.get("input_schema"))
                for tool in body.get("tools") or [] if isinstance(tool, dict) and tool.get("name")]

    def stream(self, reply: Reply, model: str, req: ScriptedRequest) -> list[bytes]:
        output = reply.usage.output + reply.usage.reasoning
        message: dict[str, Any] = {"id": f"msg_{reply.message_id}", "type": "message", "role": "assistant", "model": model,
                   "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": anthropic_usage(reply.usage, 1)}
        frames = [sse({"type": "message_start", "message": message}, "message_start"),
                  sse({"type": "ping"}, "ping")]
        for index, block in enumerate(_blocks(reply)):
            frames += self._block_frames(index, block)
        frames.append(sse({"type": "message_delta",
                           "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
                           "usage": anthropic_usage(reply.usage, output)}, "message_delta"))
        frames.append(sse({"type": "message_stop"}, "message_stop"))
        return frames

    @staticmethod
    def _block_frames(index: int, block: dict[str, Any]) -> list[bytes]:
        kind = block["type"]
        if kind == "thinking":
            start: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}  # a JSON object
            deltas = [{"type": "thinking_delta", "thinking": piece} for piece in text_pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in text_pieces(block["text"])]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            arguments = orjson.dumps(block["input"]).decode()
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in text_pieces(arguments, 2)]
        frames = [sse({"type": "content_block_start", "index": index, "content_block": start},
                      "content_block_start")]
        frames += [sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
                   for delta in deltas]
        frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        return frames

    def complete(self, reply: Reply, model: str, req: ScriptedRequest) -> dict[str, Any]:
        return {"id": f"msg_{reply.message_id}", "type": "message", "role": "assistant", "model": model,
                "content": _blocks(reply), "stop_reason": _stop_reason(reply), "stop_sequence": None,
                "usage": anthropic_usage(reply.usage, reply.usage.output + reply.usage.reasoning)}

    def side_answer(self, method: str, path: str, raw: bytes) -> tuple[str, Any] | None:
        if method == "POST" and path in ("/v1/messages/count_tokens", "/messages/count_tokens"):
            return "count tokens", {"input_tokens": count_tokens(raw)}
        return None

    def response_headers(self, reply: Reply | None) -> dict[str, str]:
        # Claude Code keeps this as the call's requestId (its de-duplication key).
        return {"request-id": f"req_{reply.message_id}" if reply else "req_scripted"}
