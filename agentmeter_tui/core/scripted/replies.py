"""What one model call answers, independent of the wire protocol.

A session turns a scenario turn into a :class:`Reply` (reasoning, text, at most one tool
call, usage in the five classes, timing, or an HTTP error); each protocol module renders a
Reply in its own shape. The shell tool is found among the tools the request offers, by the
names the real CLIs use, and its arguments are filled from the tool's own JSON schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..harnesses import ADAPTERS
from ..usage import TokenUsage
from .scenario import ScriptedError, Turn

_COMMAND_PROPERTIES = ("command", "cmd")
_FILLER = "run the scripted command"  # for other required strings (a tool may require a description)


@dataclass(frozen=True, slots=True)
class OfferedTool:
    """A tool the request offers: its name, JSON schema of the arguments, and wire kind."""

    name: str
    schema: dict[str, Any] | None = None
    kind: str = "function"  # "custom" for freeform tools of the Responses API


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str
    kind: str = "function"


@dataclass(slots=True)
class Reply:
    """One answer. ``kind``: turn | side (no tools offered) | exhausted (after the last turn)."""

    kind: str
    turn: int | None = None  # 1-based index of the scenario turn that answered
    reasoning: str | None = None
    text: str | None = None
    tool_call: ToolCall | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    delay_ms: int = 0
    stall_ms: int = 0
    reset: bool = False
    error: ScriptedError | None = None
    message_id: str = "msg"

    @property
    def label(self) -> str:
        if self.kind == "turn":
            return f"turn {self.turn}"
        return {"side": "side call", "exhausted": "after last turn"}.get(self.kind, self.kind)


def shell_tool_names() -> list[str]:
    """The shell tools of the CLIs we drive, as their adapters name them (by adapter name: the
    order they are preferred in when a request offers several)."""
    names = (ADAPTERS.get(adapter).shell_tool for adapter in ADAPTERS.names())
    return list(dict.fromkeys(name for name in names if name))


def find_shell_tool(tools: list[OfferedTool]) -> OfferedTool | None:
    by_name = {tool.name: tool for tool in tools}
    for name in shell_tool_names():
        if name in by_name:
            return by_name[name]
    return None


def shell_arguments(tool: OfferedTool, command: str) -> dict[str, Any]:
    """Arguments for ``tool`` that run ``command``: the command goes into the required string
    property (``command`` or ``cmd`` first), any other required string gets a short filler."""
    schema = tool.schema or {}
    properties = schema.get("properties") or {}
    required = [name for name in schema.get("required") or [] if _is_string(properties.get(name))]
    preferred = [name for name in _COMMAND_PROPERTIES if name in required or name in properties]
    target = (preferred or required or ["command"])[0]
    arguments: dict[str, Any] = {target: command}
    for name in required:
        arguments.setdefault(name, _FILLER)
    return arguments


def _is_string(prop: Any) -> bool:
    if not isinstance(prop, dict):
        return False
    kind = prop.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind) or kind == "STRING"


CALL_PLACEHOLDER = "{call}"


def _fill(text: str | None, call: int) -> str | None:
    # Lets one looping turn vary its calls: CLIs such as Gemini CLI stop on identical repeats.
    return text.replace(CALL_PLACEHOLDER, str(call)) if text else text


def reply_for_turn(turn: Turn, number: int, tools: list[OfferedTool], call: int, call_id: str) -> Reply:
    """The answer of scenario turn ``number`` (1-based) to the session's ``call``-th model call."""
    reply = Reply(kind="turn", turn=number, reasoning=_fill(turn.reasoning, call), text=_fill(turn.text, call),
                  usage=turn.tokens(), delay_ms=turn.delay_ms, stall_ms=turn.stall_ms, reset=turn.reset,
                  error=turn.error)
    if turn.error is not None:
        return reply
    if turn.shell is not None:
        command = _fill(turn.shell, call) or ""
        shell = find_shell_tool(tools)
        if shell is None:
            reply.text = reply.text or f"No shell tool was offered, so I cannot run: {command}"
        else:
            reply.tool_call = ToolCall(shell.name, shell_arguments(shell, command), call_id, shell.kind)
    elif turn.tool is not None:
        offered = {tool.name: tool for tool in tools}.get(turn.tool.name)
        kind = offered.kind if offered else "function"
        reply.tool_call = ToolCall(turn.tool.name, dict(turn.tool.arguments), call_id, kind)
    return reply


def text_pieces(text: str, count: int = 3) -> list[str]:
    """``text`` cut into up to ``count`` pieces that join back exactly (for streamed deltas)."""
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i:i + size] for i in range(0, len(text), size)]


def sample_json(schema: dict[str, Any]) -> Any:
    """The plainest value that fits a JSON schema: zeros, empty strings, the first enum value.

    For side calls that ask for structured output: Gemini CLI's loop check expects an object
    with ``unproductive_state_confidence`` and stalls on plain text; 0 means "not looping".
    """
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    kind = str(kind).lower() if kind else ("object" if "properties" in schema else "string")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: sample_json(sub if isinstance(sub, dict) else {}) for name, sub in properties.items()}
    return {"array": [], "string": "", "number": 0, "integer": 0, "boolean": False, "null": None}.get(kind, "")
