"""Adapter for Qwen Code 0.15.10 (``qwen --output-format stream-json``, OpenAI-compatible auth).

Its stream-json mimics Claude Code's (``system/init``, ``assistant``, ``user``, ``result``),
but the numbers carry OpenAI meaning under Anthropic names, so a Claude parser would run on
it and silently double-charge the cache:

- ``input_tokens`` is the whole prompt: cache reads *and* cache writes are inside it, and no
  cache-write figure exists, so writes land in uncached input;
- ``output_tokens`` includes reasoning, and reasoning tokens never reach stdout (the chat file
  has an estimate), so reasoning is merged into output;
- usage comes once per model call, on the ``assistant`` event that closes the call (the
  thinking and text fragments before it carry zeros); ``result.usage`` is the session total,
  taken through :meth:`StreamParser.set_total` so it corrects rather than adds.

Errors do not show in the exit code or the flags: an HTTP 400 ends as ``result/success``,
``is_error: false``, exit 0, and only the text ``[API Error: 400 ...]`` says it failed.
With ``QWEN_CODE_NO_RELAUNCH=true`` the pid we hold is the real CLI (by default it is a
launcher that does not pass signals on); SIGINT then cancels the tool and exits 130 without
a ``result``, and the chat file under ``~/.qwen/projects`` keeps every finished call's usage.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from ..usage import TokenUsage
from ..vocab import EventKind, ParsedEvent
from .base import HarnessAdapter, InstallSpec, LaunchContext, Recovery
from .claude_code import ClaudeCodeParser, block_events
from .jsonl import as_int, objects

API_ERROR = re.compile(r"^\s*\[API Error:?\s*(.*)", re.DOTALL)


def qwen_usage(usage: dict) -> TokenUsage:
    """``input_tokens`` includes the cache (reads and writes), ``output_tokens`` the reasoning."""
    prompt, cached = as_int(usage.get("input_tokens")), as_int(usage.get("cache_read_input_tokens"))
    return TokenUsage(uncached_input=max(0, prompt - cached), cached_input=cached,
                      output=as_int(usage.get("output_tokens")))


def safe_positional(text: str) -> str:
    """An instruction passed as a positional argument must not look like an option."""
    return "\n" + text if text.startswith("-") else text


class QwenCodeParser(ClaudeCodeParser):
    """Claude Code's event shapes (the dispatch is inherited) with OpenAI token meaning."""

    version_field, cli_label = "qwen_code_version", "qwen"

    def _assistant(self, obj: dict) -> list[ParsedEvent]:
        message = obj.get("message") or {}
        model = message.get("model")

        def text_event(text: str) -> ParsedEvent:
            failed = API_ERROR.match(text)
            if failed:  # Qwen's only sign of a failed API call: the text it made up for it
                self.errors.append(f"API error: {failed.group(1).rstrip(']').strip()}")
                return ParsedEvent(EventKind.ERROR, text, is_error=True, model=model)
            return ParsedEvent(EventKind.ASSISTANT, text, model=model)

        events = block_events(self, message.get("content"), model, text_event)
        usage = qwen_usage(message["usage"]) if isinstance(message.get("usage"), dict) else None
        if usage:  # the fragments before a call's closing event carry zeros
            message_id = message.get("id") or obj.get("uuid")
            event = self.count_message(str(message_id), usage, model) if message_id else \
                self.add_usage(usage, model=model)
            if event is not None:
                events.append(event)
        return events or [ParsedEvent(EventKind.SYSTEM, "assistant: (empty)", model=model)]

    def _result(self, obj: dict) -> list[ParsedEvent]:
        self.final_seen = True
        events = []
        usage = obj.get("usage")
        if isinstance(usage, dict):
            # The session total: corrects the per-call sum if they differ, never adds to it.
            turns = None if self._messages else as_int(obj.get("num_turns"))
            event = self.set_total(qwen_usage(usage), turns=turns)
            if event is not None:
                events.append(event)
        text = obj.get("result") if isinstance(obj.get("result"), str) else ""
        failed = bool(obj.get("is_error")) or obj.get("subtype") != "success"
        api_error = API_ERROR.match(text or "")
        if api_error and not self.errors:
            self.errors.append(f"API error: {api_error.group(1).rstrip(']').strip()}")
        if failed and not self.errors:
            self.errors.append(text or f"result {obj.get('subtype')}")
        failed = failed or bool(api_error)
        events.append(ParsedEvent(EventKind.SYSTEM, f"result: {obj.get('subtype')}{' (error)' if failed else ''}",
                                  is_error=failed))
        return events


def recover_qwen(files: dict[str, bytes]) -> Recovery | None:
    """Per-call usage from the chat files: ``assistant`` records with ``usageMetadata`` (Gemini
    names, same meaning as stdout: the prompt includes the cache, candidates include thoughts).
    ``thoughtsTokenCount`` is left inside output, as on stdout, so a killed trial's classes
    mean what a finished one's do."""
    calls: dict[str, TokenUsage] = {}
    sources: set[str] = set()
    for name, obj in objects(files, (b'"usageMetadata"',)):
        meta = obj.get("usageMetadata")
        if obj.get("type") != "assistant" or not isinstance(meta, dict):
            continue
        prompt, cached = as_int(meta.get("promptTokenCount")), as_int(meta.get("cachedContentTokenCount"))
        usage = TokenUsage(uncached_input=max(0, prompt - cached), cached_input=cached,
                           output=as_int(meta.get("candidatesTokenCount")))
        calls[str(obj.get("uuid") or len(calls))] = usage
        sources.add(name)
    return Recovery.per_call(calls, sources)


class QwenCodeAdapter(HarnessAdapter):
    name = "qwen-code"
    protocol = "chat"
    install = InstallSpec("npm", "@qwen-code/qwen-code", "0.15.10", "qwen", size_hint="55 MB")
    shell_tool = "run_shell_command"  # arguments {command}
    session_reader = "agentmeter_tui.core.interop.sessions.qwen_code:QwenCodeSessions"
    harbor_names = ("qwen-coder",)
    session_globs: ClassVar[list[str]] = [".qwen/projects/*/chats/*.jsonl"]
    # No cache-write figure (writes are inside input_tokens); reasoning is inside output_tokens.
    merged_classes: ClassVar[dict[str, str]] = {"cache_write": "uncached_input", "reasoning": "output"}

    def command(self, ctx: LaunchContext) -> list[str]:
        return [self.executable(ctx.clis_root), "--auth-type", "openai", "-m", ctx.model_name,
                "--output-format", "stream-json", "--approval-mode", "yolo", *ctx.extra_args,
                safe_positional(ctx.instruction)]

    def environment(self, ctx: LaunchContext) -> dict[str, str]:
        env = {
            "OPENAI_API_KEY": ctx.api_key, "OPENAI_MODEL": ctx.model_name,
            # Without it the pid is a launcher that forwards no signal: a kill would orphan the worker.
            "QWEN_CODE_NO_RELAUNCH": "true",
        }
        if ctx.base_url:
            env["OPENAI_BASE_URL"] = ctx.base_url.rstrip("/") + "/v1"
        return env

    def home_files(self, ctx: LaunchContext) -> dict[str, bytes]:
        # Managed auto-memory runs one more model call after the task (a background agent that
        # writes memories into HOME): in a HOME thrown away after the trial it is pure cost, and
        # against the scripted server it would take a turn of the scenario.
        settings = {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                    "general": {"disableAutoUpdate": True}, "memory": {"enableManagedAutoMemory": False},
                    "security": {"auth": {"selectedType": "openai"}}}
        return {".qwen/settings.json": json.dumps(settings, indent=2).encode()}

    def new_parser(self) -> QwenCodeParser:
        return QwenCodeParser()

    def recover(self, files: dict[str, bytes]) -> Recovery | None:
        return recover_qwen(files)
