"""Adapter for Gemini CLI 0.61.0 (``gemini --output-format stream-json``), Gemini API.

Token semantics (Gemini): ``input_tokens`` (prompt) includes cached tokens, ``input`` is the
uncached part; ``output_tokens`` (candidates) excludes thoughts; thoughts are only inside
``total_tokens``, so reasoning = total - input_tokens - output_tokens (tool-use prompt
tokens, if any, land there too). The Gemini API has no cache-write field: writes arrive
inside the prompt count and are indistinguishable from uncached input. stdout has usage only
in the final ``result.stats`` (totals, no call count); per-call usage is in the chat file
``~/.gemini/tmp/<project>/chats/session-*.jsonl`` (each ``gemini`` record may be written
twice under one id), read while the CLI runs and after a kill.
Errors: ``result`` with ``status: "error"`` (exit 144 on an HTTP 400, 0 when killed by a
signal without a ``result``). ``GEMINI_CLI_NO_RELAUNCH=true``: otherwise the pid we hold is a
launcher that swallows SIGINT/SIGTERM.
"""

from __future__ import annotations

from typing import ClassVar

import orjson

from ..usage import TokenUsage
from ..vocab import EventKind, ParsedEvent
from .base import HarnessAdapter, InstallSpec, LaunchContext, Recovery, StreamParser
from .jsonl import as_int, content_text, load_object, objects, tool_key, tool_text


def stats_usage(stats: dict) -> TokenUsage:
    """``result.stats``: prompt inclusive of cache; thoughts only inside the total."""
    prompt, cached = as_int(stats.get("input_tokens")), as_int(stats.get("cached"))
    output, total = as_int(stats.get("output_tokens")), as_int(stats.get("total_tokens"))
    return TokenUsage(uncached_input=max(0, prompt - cached), cached_input=cached, output=output,
                      reasoning=max(0, total - prompt - output))


def record_usage(tokens: dict) -> TokenUsage:
    """A chat-file record's ``tokens``: ``input`` is the prompt (inclusive of ``cached``) unless
    the record's total says otherwise; ``tool`` (tool-use prompt) is uncached input."""
    prompt, cached, output = as_int(tokens.get("input")), as_int(tokens.get("cached")), as_int(tokens.get("output"))
    thoughts, tool, total = as_int(tokens.get("thoughts")), as_int(tokens.get("tool")), as_int(tokens.get("total"))
    if total and total == prompt + cached + output + thoughts + tool:
        prompt += cached  # this record's input already excludes the cache
    return TokenUsage(uncached_input=max(0, prompt - cached) + tool, cached_input=cached, output=output,
                      reasoning=thoughts)


class GeminiCliParser(StreamParser):
    final_record = "result"  # killed by a signal it exits 0 without one

    def feed(self, stream: str, line: bytes) -> list[ParsedEvent]:
        obj = load_object(line) if stream == "stdout" else None
        if obj is None:
            return [self.raw(line)]
        kind = obj.get("type")
        if kind == "message":
            text = content_text(obj.get("content"))
            if obj.get("role") == "assistant":
                return [ParsedEvent(EventKind.ASSISTANT, text)]
            return [ParsedEvent(EventKind.SYSTEM, f"{obj.get('role')}: {text}")]
        if kind == "tool_use":
            name, arguments = str(obj.get("tool_name") or "?"), obj.get("parameters") or {}
            self.tool_calls += 1
            return [ParsedEvent(EventKind.TOOL_CALL, tool_text(arguments), tool_name=name,
                                tool_key=tool_key(name, arguments))]
        if kind == "tool_result":
            output = obj.get("output")
            if output is None and isinstance(obj.get("error"), dict):
                output = obj["error"].get("message")
            return [ParsedEvent(EventKind.TOOL_RESULT, content_text(output),
                                is_error=obj.get("status") not in ("success", None))]
        if kind == "result":
            return self._result(obj)
        if kind == "error":  # documented as non-fatal; a fatal error ends in result/error
            return [ParsedEvent(EventKind.ERROR, str(obj.get("message") or ""), is_error=True)]
        if kind == "init":
            return [ParsedEvent(EventKind.SYSTEM, f"init: model {obj.get('model')}, session {obj.get('session_id')}",
                                model=obj.get("model"))]
        return [self.raw(line)]

    def _result(self, obj: dict) -> list[ParsedEvent]:
        self.final_seen = True
        events = []
        stats = obj.get("stats")
        if isinstance(stats, dict):
            event = self.set_total(stats_usage(stats))
            if event is not None:
                events.append(event)
        status = obj.get("status")
        if status != "success":
            error = sub if isinstance(sub := obj.get("error"), dict) else {}
            self.errors.append(str(error.get("message") or f"result status {status}"))
            events.append(ParsedEvent(EventKind.ERROR, self.errors[-1], is_error=True))
        events.append(ParsedEvent(EventKind.SYSTEM, f"result: {status}", is_error=status != "success"))
        return events


def recover_gemini(files: dict[str, bytes]) -> Recovery | None:
    """Per-call usage from chat files: ``gemini`` records (also inside ``$set.messages``),
    one per id, the copy with the largest figures."""
    best: dict[str, TokenUsage] = {}
    sources = set()

    def take(name: str, record: dict) -> None:
        if record.get("type") == "gemini" and isinstance(record.get("tokens"), dict):
            key = str(record.get("id") or f"{name}:{len(best)}")
            found = record_usage(record["tokens"])
            if key not in best or found.raw > best[key].raw:
                best[key] = found
            sources.add(name)

    for name, obj in objects(files, (b'"tokens"',)):
        take(name, obj)
        messages = (obj.get("$set") or {}).get("messages") if isinstance(obj.get("$set"), dict) else None
        for record in messages if isinstance(messages, list) else obj.get("messages") or []:
            if isinstance(record, dict):
                take(name, record)
    return Recovery.per_call(best, sources)


class GeminiCliAdapter(HarnessAdapter):
    name = "gemini-cli"
    protocol = "gemini"
    install = InstallSpec("npm", "@google/gemini-cli", "0.61.0", "gemini", size_hint="100 MB")
    shell_tool = "run_shell_command"  # arguments {command}
    session_reader = "agentmeter_tui.core.interop.sessions.gemini_cli:GeminiCliSessions"
    harbor_names = ("gemini-cli",)
    base_url_env: ClassVar[dict[str, str]] = {"GOOGLE_GEMINI_BASE_URL": ""}  # its own, not the SDK's
    session_globs: ClassVar[list[str]] = [".gemini/tmp/*/chats/*.jsonl", ".gemini/tmp/*/chats/*.json"]
    merged_classes: ClassVar[dict[str, str]] = {"cache_write": "uncached_input"}  # the Gemini API has no cache-write count
    live_session_poll = 0.5

    def command(self, ctx: LaunchContext) -> list[str]:
        # --prompt=...: one argv element, so an instruction starting with a dash stays a value.
        return [self.executable(ctx.clis_root), "-m", ctx.model_name, "--output-format", "stream-json",
                "--approval-mode", "yolo", *ctx.extra_args, f"--prompt={ctx.instruction}"]

    def environment(self, ctx: LaunchContext) -> dict[str, str]:
        env = {"GEMINI_API_KEY": ctx.api_key, "GEMINI_CLI_TRUST_WORKSPACE": "true",
               "GEMINI_CLI_NO_RELAUNCH": "true"}  # the pid we hold is then the CLI itself
        if ctx.base_url:
            env["GOOGLE_GEMINI_BASE_URL"] = ctx.base_url.rstrip("/")
        return env

    def home_files(self, ctx: LaunchContext) -> dict[str, bytes]:
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                    "general": {"disableAutoUpdate": True}}
        return {".gemini/settings.json": orjson.dumps(settings, option=orjson.OPT_INDENT_2)}

    def new_parser(self) -> GeminiCliParser:
        return GeminiCliParser()

    def recover(self, files: dict[str, bytes]) -> Recovery | None:
        return recover_gemini(files)
