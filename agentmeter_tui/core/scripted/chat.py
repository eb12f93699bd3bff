"""OpenAI Chat Completions (``POST /v1/chat/completions``), streaming and not.

Used by Qwen Code, Kimi CLI, opencode and the reference agent. Usage semantics (OpenAI):
``prompt_tokens`` includes cache reads and cache writes, ``completion_tokens`` includes
reasoning. ``prompt_tokens_details.cache_write_tokens`` is not part of OpenAI's API: we add
it so that cache writes are visible on this protocol at all. Reasoning text streams as
``delta.reasoning_content`` (the DeepSeek / Qwen / Moonshot convention).
"""

from __future__ import annotations

from typing import Any

import orjson

from ..wire.chat import to_chat as chat_usage
from .replies import OfferedTool, Reply, text_pieces
from .protocol import ScriptedProtocol, ScriptedRequest, now, sse

class ScriptedChatCompletions(ScriptedProtocol):
    name = "chat"

    def wanted_json(self, body: dict[str, Any]) -> dict[str, Any] | None:
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return (fmt.get("json_schema") or {}).get("schema") or {}
        return {} if fmt.get("type") == "json_object" else None

    def offered_tools(self, body: dict[str, Any]) -> list[OfferedTool]:
        tools = []
        for tool in body.get("tools") or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and function.get("name"):
                tools.append(OfferedTool(function["name"], function.get("parameters")))
        return tools

    def stream(self, reply: Reply, model: str, req: ScriptedRequest) -> list[bytes]:
        options = req.body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        base = {"id": f"chatcmpl-{reply.message_id}", "object": "chat.completion.chunk", "created": now(),
                "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return sse({**base, "choices": [choice], **extra})

        frames = [chunk({"role": "assistant", "content": ""})]
        frames += [chunk({"reasoning_content": piece}) for piece in text_pieces(reply.reasoning or "")]
        frames += [chunk({"content": piece}) for piece in text_pieces(reply.text or "")]
        call = reply.tool_call
        if call is not None:
            arguments = orjson.dumps(call.arguments).decode()
            head = {"index": 0, "id": call.call_id, "type": "function",
                    "function": {"name": call.name, "arguments": ""}}
            frames.append(chunk({"tool_calls": [head]}))
            frames += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                       for piece in text_pieces(arguments, 2)]
        finish = "tool_calls" if call is not None else "stop"
        # Usage goes into its own last chunk when asked for (stream_options.include_usage); some
        # clients never ask and read it off the finishing chunk, as Moonshot and DeepSeek send it.
        if include_usage:
            frames.append(chunk({}, finish))
            frames.append(sse({**base, "choices": [], "usage": chat_usage(reply.usage)}))
        else:
            frames.append(chunk({}, finish, usage=chat_usage(reply.usage)))
        frames.append(b"data: [DONE]\n\n")
        return frames

    def complete(self, reply: Reply, model: str, req: ScriptedRequest) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        call = reply.tool_call
        if call is not None:
            message["tool_calls"] = [{"id": call.call_id, "type": "function", "function": {
                "name": call.name, "arguments": orjson.dumps(call.arguments).decode()}}]
        return {
            "id": f"chatcmpl-{reply.message_id}", "object": "chat.completion", "created": now(), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if call is not None else "stop"}],
            "usage": chat_usage(reply.usage),
        }
