"""OpenAI Responses (``POST /v1/responses``), streaming and not.

Used by Codex. Usage semantics (OpenAI): ``input_tokens`` includes cache reads and writes,
``input_tokens_details.cached_tokens`` are the reads and ``cache_write_tokens`` the writes
(Codex reads that field into its ``cache_write_input_tokens``); ``output_tokens`` includes
``output_tokens_details.reasoning_tokens``. Output items: ``reasoning`` (with a summary),
``message`` and ``function_call`` (or ``custom_tool_call`` for a freeform tool).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from ..wire.responses import to_responses as responses_usage
from .replies import OfferedTool, Reply, text_pieces
from .protocol import ScriptedProtocol, ScriptedRequest, now, sse


def _items(reply: Reply) -> list[dict[str, Any]]:
    """The completed output items, in order."""
    items: list[dict[str, Any]] = []
    rid = reply.message_id
    if reply.reasoning:
        digest = hashlib.sha256(reply.reasoning.encode()).hexdigest()[:32]
        items.append({"id": f"rs_{rid}", "type": "reasoning", "encrypted_content": f"scripted-{digest}",
                      "summary": [{"type": "summary_text", "text": reply.reasoning}]})
    if reply.text:
        items.append({"id": f"msg_{rid}", "type": "message", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    call = reply.tool_call
    if call is not None and call.kind == "custom":
        raw = call.arguments.get("input")
        text = raw if isinstance(raw, str) else orjson.dumps(call.arguments).decode()
        items.append({"id": f"ctc_{rid}", "type": "custom_tool_call", "status": "completed",
                      "call_id": call.call_id, "name": call.name, "input": text})
    elif call is not None:
        items.append({"id": f"fc_{rid}", "type": "function_call", "status": "completed",
                      "call_id": call.call_id, "name": call.name,
                      "arguments": orjson.dumps(call.arguments).decode()})
    return items


class ScriptedResponses(ScriptedProtocol):
    name = "responses"

    def wanted_json(self, body: dict[str, Any]) -> dict[str, Any] | None:
        fmt = (body.get("text") or {}).get("format") or {}
        if fmt.get("type") == "json_schema":
            return fmt.get("schema") or {}
        return {} if fmt.get("type") == "json_object" else None

    def offered_tools(self, body: dict[str, Any]) -> list[OfferedTool]:
        tools = []
        for tool in body.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "function" and tool.get("name"):
                tools.append(OfferedTool(tool["name"], tool.get("parameters")))
            elif tool.get("type") == "custom" and tool.get("name"):
                tools.append(OfferedTool(tool["name"], None, kind="custom"))
            elif tool.get("type"):  # built-in tools (web_search, local_shell, ...) still count as offered
                tools.append(OfferedTool(str(tool.get("name") or tool["type"]), None, kind=tool["type"]))
        return tools

    def _response(self, reply: Reply, model: str, status: str, output: list, usage: Any) -> dict[str, Any]:
        return {"id": f"resp_{reply.message_id}", "object": "response", "created_at": now(), "status": status,
                "model": model, "output": output, "usage": usage, "error": None, "incomplete_details": None}

    def stream(self, reply: Reply, model: str, req: ScriptedRequest) -> list[bytes]:
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": self._response(reply, model, "in_progress", [], None)}),
            ("response.in_progress", {"response": self._response(reply, model, "in_progress", [], None)}),
        ]
        items = _items(reply)
        for index, item in enumerate(items):
            events += _item_events(index, item)
        done = self._response(reply, model, "completed", items, responses_usage(reply.usage))
        events.append(("response.completed", {"response": done}))
        return [sse({"type": kind, "sequence_number": number, **data}, kind)
                for number, (kind, data) in enumerate(events)]

    def complete(self, reply: Reply, model: str, req: ScriptedRequest) -> dict[str, Any]:
        return self._response(reply, model, "completed", _items(reply), responses_usage(reply.usage))


def _item_events(index: int, item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    at = {"output_index": index, "item_id": item["id"]}
    kind = item["type"]
    events: list[tuple[str, dict[str, Any]]] = []
    if kind == "reasoning":
        text = item["summary"][0]["text"]
        part: dict[str, Any] = {"type": "summary_text", "text": ""}  # a JSON object of the wire
        events.append(("response.output_item.added", {"output_index": index, "item": {**item, "summary": []}}))
        events.append(("response.reasoning_summary_part.added", {**at, "summary_index": 0, "part": part}))
        events += [("response.reasoning_summary_text.delta", {**at, "summary_index": 0, "delta": piece})
                   for piece in text_pieces(text)]
        events.append(("response.reasoning_summary_text.done", {**at, "summary_index": 0, "text": text}))
        events.append(("response.reasoning_summary_part.done",
                       {**at, "summary_index": 0, "part": {**part, "text": text}}))
    elif kind == "message":
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        events.append(("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "content": []}}))
        events.append(("response.content_part.added", {**at, "content_index": 0, "part": part}))
        events += [("response.output_text.delta", {**at, "content_index": 0, "delta": piece})
                   for piece in text_pieces(text)]
        events.append(("response.output_text.done", {**at, "content_index": 0, "text": text}))
        events.append(("response.content_part.done", {**at, "content_index": 0, "part": {**part, "text": text}}))
    elif kind == "function_call":
        events.append(("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "arguments": ""}}))
        events += [("response.function_call_arguments.delta", {**at, "delta": piece})
                   for piece in text_pieces(item["arguments"], 2)]
        events.append(("response.function_call_arguments.done", {**at, "arguments": item["arguments"]}))
    else:  # custom_tool_call
        events.append(("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "input": ""}}))
        events += [("response.custom_tool_call_input.delta", {**at, "delta": piece})
                   for piece in text_pieces(item["input"], 2)]
        events.append(("response.custom_tool_call_input.done", {**at, "input": item["input"]}))
    events.append(("response.output_item.done", {"output_index": index, "item": item}))
    return events
