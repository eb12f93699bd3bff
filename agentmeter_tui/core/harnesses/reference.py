"""Adapter for the project's own reference agent (``agentmeter_tui/refagent``).

Its ``usage`` lines carry the Chat Completions usage object of one call: input inclusive of
cache reads and writes, output inclusive of reasoning, so both are subtracted
(``wire.chat.from_chat``).
"""

from __future__ import annotations

from pathlib import Path

import orjson

from ..vocab import EventKind, ParsedEvent
from ..wire.chat import from_chat as chat_usage  # the agent prints each call's Chat Completions usage
from .base import HarnessAdapter, InstallSpec, LaunchContext, StreamParser

AGENT_FILE = Path(__file__).resolve().parents[2] / "refagent" / "agent.py"


class ReferenceParser(StreamParser):
    def feed(self, stream: str, line: bytes) -> list[ParsedEvent]:
        if stream != "stdout" or not line.lstrip()[:1] == b"{":
            # Not a JSON object: raw, without paying for orjson's error (its Python-level
            # JSONDecodeError costs more than the parse) on every line of a flood.
            return [self.raw(line)]
        try:
            obj = orjson.loads(line)
            kind = obj["type"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return [self.raw(line)]
        if kind == "assistant":
            return [ParsedEvent(EventKind.ASSISTANT, obj.get("text", ""))]
        if kind == "tool_call":
            self.tool_calls += 1
            arguments = obj.get("arguments") or {}
            command = arguments.get("command") if isinstance(arguments, dict) else None
            key = obj.get("name", "") + ":" + orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
            return [ParsedEvent(EventKind.TOOL_CALL, command or str(arguments), tool_name=obj.get("name"),
                                tool_key=key)]
        if kind == "tool_result":
            code = obj.get("exit_code")
            return [ParsedEvent(EventKind.TOOL_RESULT, obj.get("output", ""), is_error=code not in (0, None))]
        if kind == "usage" and isinstance(obj.get("usage"), dict):
            return [self.add_usage(chat_usage(obj["usage"]), turns=1)]
        if kind == "reasoning":
            return [ParsedEvent(EventKind.REASONING, obj.get("text", ""))]
        if kind == "error":
            message = f"HTTP {obj['status']}: {obj.get('message', '')}" if obj.get("status") else obj.get("message", "")
            self.errors.append(message)
            return [ParsedEvent(EventKind.ERROR, message, is_error=True)]
        if kind == "result":
            self.final_seen = True
            status = obj.get("status")
            if status not in ("success", "interrupted") and not self.errors:
                self.errors.append(f"agent ended with status {status}")
            return [ParsedEvent(EventKind.SYSTEM, f"result: {status}", is_error=status != "success")]
        if kind == "init":
            return [ParsedEvent(EventKind.SYSTEM, f"init: model {obj.get('model')}", model=obj.get("model"))]
        return [self.raw(line)]


class ReferenceAdapter(HarnessAdapter):
    name = "reference"
    protocol = "chat"
    install = InstallSpec("bundled", "agentmeter-refagent", "0.1.0", "refagent")
    shell_tool = "shell"  # arguments {command}

    def executable(self, clis_root: str) -> str:
        return str(AGENT_FILE)

    def is_installed(self, clis_root: Path) -> bool:
        return AGENT_FILE.is_file()

    def command(self, ctx: LaunchContext) -> list[str]:
        return [ctx.python, "-S", "-u", str(AGENT_FILE), "--model", ctx.model_name, *ctx.extra_args, ctx.instruction]

    def environment(self, ctx: LaunchContext) -> dict[str, str]:
        return {"REFAGENT_BASE_URL": ctx.base_url.rstrip("/") + "/v1", "REFAGENT_API_KEY": ctx.api_key}

    def new_parser(self) -> ReferenceParser:
        return ReferenceParser()
