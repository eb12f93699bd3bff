"""Adapter for Claude Code 2.1.197 (``claude -p --output-format stream-json --verbose``).

Token semantics (Anthropic): ``input_tokens`` excludes cache reads and writes, thinking is
inside ``output_tokens`` and never counted apart, so reasoning is merged into output.
stream-json prints one ``assistant`` event per content block, all with the same
``message.id`` and the same usage, whose ``output_tokens`` is the ``message_start`` figure
(1), not the final one. So each message's usage is counted once, as a live estimate, and the
final ``result`` (its ``modelUsage``, which also covers background models) is taken as the
truth through :meth:`StreamParser.set_total`. Until then the runner reads the session files
(``live_session_poll``), where each call has its final usage, and merges them call by call,
so the meter and a USD or token budget see the output a call really cost within a second.
``total_cost_usd`` is Claude Code's own figure, priced from Anthropic's table whatever the
endpoint: the bill only on Anthropic itself.
Errors: an HTTP 400 ends in ``result`` with ``subtype: success`` and ``is_error: true``.
After a kill without a ``result`` (SIGTERM), ``~/.claude/projects/*/<session>.jsonl`` has
each call's final usage, written more than once per message id.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import ClassVar

from ..usage import TokenUsage
from ..vocab import EventKind, ParsedEvent
from ..wire.anthropic import from_anthropic as anthropic_usage  # input excludes the cache
from .base import HarnessAdapter, InstallSpec, LaunchContext, Recovery, StreamParser
from .jsonl import as_int, content_text, load_object, objects, tool_key, tool_text

SYNTHETIC = "<synthetic>"  # the model name of messages Claude Code makes up itself (API errors)


def model_usage_total(model_usage: dict) -> TokenUsage:
    """The sum of ``result.modelUsage`` (camelCase, one entry per model used)."""
    total = TokenUsage()
    for entry in model_usage.values():
        if isinstance(entry, dict):
            total = total + TokenUsage(uncached_input=as_int(entry.get("inputTokens")),
                                       cached_input=as_int(entry.get("cacheReadInputTokens")),
                                       cache_write=as_int(entry.get("cacheCreationInputTokens")),
                                       output=as_int(entry.get("outputTokens")))
    return total


def block_events(parser: StreamParser, content: object, model: str | None,
                 text_event: Callable[[str], ParsedEvent] | None = None) -> list[ParsedEvent]:
    """Events for the content blocks of an Anthropic-shaped assistant message (Claude Code, and
    Qwen Code, which copies its stream-json); ``text_event`` lets a CLI read its text blocks."""
    events: list[ParsedEvent] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text":
            text = block.get("text") or ""
            events.append(text_event(text) if text_event else ParsedEvent(EventKind.ASSISTANT, text, model=model))
        elif btype in ("thinking", "redacted_thinking"):
            events.append(ParsedEvent(EventKind.REASONING, block.get("thinking") or "", model=model))
        elif btype in ("tool_use", "server_tool_use"):
            name, arguments = block.get("name") or "?", block.get("input") or {}
            parser.tool_calls += 1
            events.append(ParsedEvent(EventKind.TOOL_CALL, tool_text(arguments), tool_name=name,
                                      tool_key=tool_key(name, arguments), model=model))
    return events


def user_events(obj: dict) -> list[ParsedEvent]:
    """A ``user`` line of Claude-style stream-json: tool results, and text the CLI adds."""
    content = (obj.get("message") or {}).get("content")
    events = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                events.append(ParsedEvent(EventKind.TOOL_RESULT, content_text(block.get("content")),
                                          is_error=bool(block.get("is_error"))))
            elif isinstance(block, dict) and block.get("type") == "text":
                events.append(ParsedEvent(EventKind.SYSTEM, f"user: {block.get('text') or ''}"))
    elif isinstance(content, str):
        events.append(ParsedEvent(EventKind.SYSTEM, f"user: {content}"))
    return events or [ParsedEvent(EventKind.SYSTEM, "user: (empty)")]


class ClaudeCodeParser(StreamParser):
    """Claude Code's stream-json. Qwen Code copies the shape (``QwenCodeParser`` subclasses
    this) but not the token semantics, so ``_assistant`` and ``_result`` are per CLI."""

    final_record = "result"
    version_field, cli_label = "claude_code_version", "claude"

    def feed(self, stream: str, line: bytes) -> list[ParsedEvent]:
        obj = load_object(line) if stream == "stdout" else None
        if obj is None:
            return [self.raw(line)]
        kind = obj.get("type")
        if kind == "assistant":
            return self._assistant(obj)
        if kind == "user":
            return user_events(obj)
        if kind == "result":
            return self._result(obj)
        if kind == "system":
            subtype = obj.get("subtype")
            if subtype == "init":
                return [ParsedEvent(EventKind.SYSTEM, f"init: model {obj.get('model')}, session "
                                    f"{obj.get('session_id')}, {self.cli_label} {obj.get(self.version_field)}",
                                    model=obj.get("model"))]
            if subtype == "thinking_tokens":
                return [ParsedEvent(EventKind.SYSTEM, f"thinking: ~{obj.get('estimated_tokens')} tokens")]
            return [ParsedEvent(EventKind.SYSTEM, f"system: {subtype}")]
        if kind == "stream_event":  # --include-partial-messages: raw SSE events; result has the totals
            event = obj.get("event") or {}
            return [ParsedEvent(EventKind.SYSTEM, f"stream: {event.get('type')}")]
        return [self.raw(line)]

    def _assistant(self, obj: dict) -> list[ParsedEvent]:
        message = obj.get("message") or {}
        model = message.get("model")
        events = block_events(self, message.get("content"), model)
        if obj.get("error"):  # a message Claude Code made up for a failed API call
            text = content_text(message.get("content")) or f"API error: {obj.get('error')}"
            events.append(ParsedEvent(EventKind.ERROR, text, is_error=True))
        usage = message.get("usage")
        message_id = message.get("id")
        if isinstance(usage, dict) and message_id and model != SYNTHETIC:
            event = self.count_message(str(message_id), anthropic_usage(usage), model)
            if event is not None:
                events.append(event)
        return events or [ParsedEvent(EventKind.SYSTEM, "assistant: (empty)", model=model)]

    def _result(self, obj: dict) -> list[ParsedEvent]:
        self.final_seen = True
        cost = obj.get("total_cost_usd")
        if cost is not None:
            try:
                self.reported_cost_usd = Decimal(str(cost))
            except InvalidOperation:
                pass
        model_usage = obj.get("modelUsage")
        if isinstance(model_usage, dict) and model_usage:
            total = model_usage_total(model_usage)
        else:
            total = anthropic_usage(obj.get("usage") or {})
        # num_turns counts agent turns, not model calls: only a stand-in when no message was seen.
        turns = as_int(obj.get("num_turns")) if total and not self._messages else None
        events = []
        usage_event = self.set_total(total, turns=turns)
        if usage_event is not None:
            usage_event.reported_cost_usd = self.reported_cost_usd
            events.append(usage_event)
        subtype = obj.get("subtype")
        failed = bool(obj.get("is_error")) or subtype != "success"
        if failed:
            status = obj.get("api_error_status")
            detail = obj.get("result") if isinstance(obj.get("result"), str) else None
            message = detail or (f"HTTP {status}" if status else f"result {subtype}")
            errors = obj.get("errors")
            if not detail and isinstance(errors, list) and errors:
                message = f"{message}: {errors[0]}"
            self.errors.append(message)
        text = f"result: {subtype}{' (error)' if failed else ''}, {obj.get('terminal_reason') or obj.get('stop_reason')}"
        events.append(ParsedEvent(EventKind.SYSTEM, text, is_error=failed, reported_cost_usd=self.reported_cost_usd))
        return events


def recover_claude(files: dict[str, bytes]) -> Recovery | None:
    """Per-call usage from Claude Code's session files: one entry per message id, the copy
    with the largest figures (the files repeat a message, sometimes with a smaller snapshot)."""
    best: dict[str, TokenUsage] = {}
    sources: set[str] = set()
    for name, obj in objects(files, (b'"assistant"',)):
        message = obj.get("message")
        if obj.get("type") != "assistant" or not isinstance(message, dict) or message.get("model") == SYNTHETIC:
            continue
        usage, message_id = message.get("usage"), message.get("id")
        if not isinstance(usage, dict) or not message_id:
            continue
        found = anthropic_usage(usage)
        if message_id not in best or found.raw > best[message_id].raw:
            best[message_id] = found
        sources.add(name)
    return Recovery.per_call(best, sources, stream_ids=True)  # the message ids stdout prints


class ClaudeCodeAdapter(HarnessAdapter):
    name = "claude-code"
    protocol = "anthropic"
    install = InstallSpec("npm", "@anthropic-ai/claude-code", "2.1.197", "claude", size_hint="235 MB")
    reports_cost_for = frozenset({"anthropic"})
    shell_tool = "Bash"  # arguments {command}
    session_reader = "agentmeter_tui.core.interop.sessions.claude_code:ClaudeCodeSessions"
    harbor_names = ("claude-code",)
    session_globs: ClassVar[list[str]] = [".claude/projects/*/*.jsonl", ".claude/projects/*/*/subagents/*.jsonl"]
    merged_classes: ClassVar[dict[str, str]] = {"reasoning": "output"}  # thinking is inside output_tokens, never split out
    live_session_poll = 0.5

    def command(self, ctx: LaunchContext) -> list[str]:
        # "--" before the instruction: an instruction may start with a dash.
        return [self.executable(ctx.clis_root), "-p", "--output-format", "stream-json", "--verbose",
                "--model", ctx.model_name, "--dangerously-skip-permissions", *ctx.extra_args, "--", ctx.instruction]

    def environment(self, ctx: LaunchContext) -> dict[str, str]:
        env = {
            "ANTHROPIC_API_KEY": ctx.api_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no title, quota or update calls
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_MAX_RETRIES": "3",  # keeps a failing provider from stalling a trial for minutes
            # Running as root, --dangerously-skip-permissions needs exactly "1" here ("yes" fails).
            "IS_SANDBOX": "1",
        }
        if ctx.base_url:
            env["ANTHROPIC_BASE_URL"] = ctx.base_url.rstrip("/")
        return env

    def new_parser(self) -> ClaudeCodeParser:
        return ClaudeCodeParser()

    def recover(self, files: dict[str, bytes]) -> Recovery | None:
        return recover_claude(files)
