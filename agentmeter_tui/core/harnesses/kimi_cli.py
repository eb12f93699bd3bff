"""Adapter for Kimi CLI 1.51.0 (``kimi --print --output-format stream-json``), the legacy
Python CLI from PyPI, in its own venv (1.52.0 is an archived stub: never install or run it).

Its stdout is plain chat messages, one per line and without a ``type``: ``{"role":
"assistant", "content": ..., "tool_calls": [...]}`` (printed once the step's tools have
finished) and ``{"role": "tool", ...}``. **No usage at all reaches stdout.** Each model
call's usage is in the wire log ``$HOME/.kimi/sessions/<workdir hash>/<session>/wire.jsonl``,
as ``StatusUpdate.payload.token_usage`` {``input_other`` (uncached, and through Chat
Completions the cache writes too: ``input_cache_creation`` stays 0), ``input_cache_read``,
``input_cache_creation``, ``output`` (reasoning included, never split)} with the call's
``message_id``. The runner reads that file while the CLI runs (``live_session_poll``) and
after it ends (the parser never sees a final record, so recovery always runs), and the
parser takes it as the running total (``absorb``).

Errors are plain text on stdout (``Error code: 400 - {...}``, wrapped over several lines),
exit 1, or 75 for retryable ones. SIGTERM loses everything buffered on stdout; SIGINT prints
"Interrupted by user" (on stdout: an error line, ignored for a killed trial) and exits 1. The
key goes in ``KIMI_API_KEY``, not in the config file.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from ..usage import TokenUsage
from ..vocab import EventKind, ParsedEvent
from .base import HarnessAdapter, InstallSpec, LaunchContext, Recovery, StreamParser
from .jsonl import as_int, content_text, load_object, objects, tool_key, tool_text

MODEL_ALIAS = "agentmeter"  # the model and provider entry in config.toml
TOOL_ERROR = re.compile(r"^\s*<system>ERROR:")
ERROR_TEXT_LIMIT = 1000


def wire_usage(token_usage: dict) -> TokenUsage:
    return TokenUsage(uncached_input=as_int(token_usage.get("input_other")),
                      cached_input=as_int(token_usage.get("input_cache_read")),
                      cache_write=as_int(token_usage.get("input_cache_creation")),
                      output=as_int(token_usage.get("output")))


def recover_kimi(files: dict[str, bytes]) -> Recovery | None:
    """Each call's ``StatusUpdate.token_usage`` from the wire logs, once per ``message_id``
    (a later update of the same call replaces the earlier one; a null means no change)."""
    calls: dict[str, TokenUsage] = {}
    sources: set[str] = set()
    for name, obj in objects(files, (b'"StatusUpdate"',)):
        message = sub if isinstance(sub := obj.get("message"), dict) else {}
        payload = sub if isinstance(sub := message.get("payload"), dict) else {}
        token_usage = payload.get("token_usage")
        if message.get("type") != "StatusUpdate" or not isinstance(token_usage, dict):
            continue
        key = str(payload.get("message_id") or f"{name}:{len(calls)}")
        calls[key] = wire_usage(token_usage)
        sources.add(name)
    return Recovery.per_call(calls, sources)


class KimiCliParser(StreamParser):
    """Transcript from stdout; usage only through :meth:`absorb` (the wire log). No end record
    exists, so the verdict is the base rule: an error line, else a non-zero exit code."""

    def __init__(self) -> None:
        super().__init__()
        self._in_error = False  # inside a plain-text error message that spans several lines

    def feed(self, stream: str, line: bytes) -> list[ParsedEvent]:
        obj = load_object(line) if stream == "stdout" else None
        if obj is None:
            if stream == "stdout" and line.strip():
                return [self._error_text(line.decode("utf-8", "replace").rstrip())]
            return [self.raw(line)]
        self._in_error = False
        role = obj.get("role")
        if role == "assistant":
            return self._assistant(obj)
        if role == "tool":
            text = content_text(obj.get("content"))
            return [ParsedEvent(EventKind.TOOL_RESULT, text, is_error=bool(TOOL_ERROR.match(text)))]
        return [ParsedEvent(EventKind.SYSTEM, f"{obj.get('type') or role or 'message'}: "
                            f"{content_text(obj.get('content')) or ''}"[:500])]

    def _assistant(self, obj: dict) -> list[ParsedEvent]:
        events = []
        content = obj.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "think":
                events.append(ParsedEvent(EventKind.REASONING, str(part.get("think") or "")))
            elif part.get("type") == "text":
                events.append(ParsedEvent(EventKind.ASSISTANT, str(part.get("text") or "")))
        for call in obj.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            name = str(function.get("name") or "?")
            arguments = load_object(str(function.get("arguments") or "").encode()) or \
                {"arguments": function.get("arguments")}
            self.tool_calls += 1
            events.append(ParsedEvent(EventKind.TOOL_CALL, tool_text(arguments), tool_name=name,
                                      tool_key=tool_key(name, arguments)))
        return events or [ParsedEvent(EventKind.SYSTEM, "assistant: (empty)")]

    def _error_text(self, text: str) -> ParsedEvent:
        """In stream-json mode every non-JSON line on stdout is Kimi telling why it stopped
        (provider errors, max steps, "Interrupted by user"); a long one wraps over lines."""
        if self._in_error and self.errors:
            self.errors[-1] = (self.errors[-1] + text)[:ERROR_TEXT_LIMIT]
            return ParsedEvent(EventKind.RAW, text)
        self._in_error = True
        self.errors.append(text[:ERROR_TEXT_LIMIT])
        return ParsedEvent(EventKind.ERROR, text, is_error=True)


class KimiCliAdapter(HarnessAdapter):
    name = "kimi-cli"
    protocol = "chat"
    install = InstallSpec("pypi", "kimi-cli", "1.51.0", "kimi", python="3.13", size_hint="351 MB")
    shell_tool = "Shell"  # arguments {command}
    session_reader = "agentmeter_tui.core.interop.sessions.kimi_cli:KimiCliSessions"
    harbor_names = ("kimi-cli",)
    base_url_env: ClassVar[dict[str, str]] = {"KIMI_BASE_URL": "/v1"}
    key_env = ("KIMI_API_KEY",)
    blocked_versions: ClassVar[dict[str, str]] = {
        "1.52.0": "an archived stub that refuses every command and, run bare, pipes a remote install script into bash"}
    session_globs: ClassVar[list[str]] = [".kimi/sessions/*/*/wire.jsonl"]
    # stdout has no usage: read the wire log while it runs, for meters and budgets. A loop of quick
    # calls runs ~10 calls a second here, so a budget can overshoot by what one interval holds.
    live_session_poll = 0.5
    # Cache writes come back inside input_other; output includes reasoning and is never split.
    merged_classes: ClassVar[dict[str, str]] = {"cache_write": "uncached_input", "reasoning": "output"}

    def command(self, ctx: LaunchContext) -> list[str]:
        return [self.executable(ctx.clis_root), "--print", "--output-format", "stream-json",
                "--work-dir", ctx.workspace, *ctx.extra_args, f"--prompt={ctx.instruction}"]

    def environment(self, ctx: LaunchContext) -> dict[str, str]:
        return {"KIMI_API_KEY": ctx.api_key, "PYTHONUNBUFFERED": "1"}

    def home_files(self, ctx: LaunchContext) -> dict[str, bytes]:
        base = ctx.base_url.rstrip("/") + "/v1" if ctx.base_url else ""
        config = (f'default_model = "{MODEL_ALIAS}"\ntelemetry = false\n\n'
                  f'[providers.{MODEL_ALIAS}]\ntype = "kimi"\nbase_url = {json.dumps(base)}\n'
                  f'api_key = "from KIMI_API_KEY"\n\n'
                  f'[models.{MODEL_ALIAS}]\nprovider = "{MODEL_ALIAS}"\nmodel = {json.dumps(ctx.model_name)}\n'
                  f'max_context_size = 262144\n')
        return {".kimi/config.toml": config.encode()}

    def new_parser(self) -> KimiCliParser:
        return KimiCliParser()

    def recover(self, files: dict[str, bytes]) -> Recovery | None:
        return recover_kimi(files)

