"""Adapter for Codex CLI 0.169.0 (``codex exec --json``), OpenAI Responses API.

Token semantics (OpenAI): ``input_tokens`` includes cache reads (``cached_input_tokens``)
and cache writes (``cache_write_input_tokens``); ``output_tokens`` includes
``reasoning_output_tokens``. stdout has usage only in ``turn.completed``, and that figure is
the thread's running total: it is taken with :meth:`StreamParser.set_total`, never added on
top of anything. Per-call usage (and so the number of model calls) is only in the rollout
file ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`` (``token_usage_record`` per response,
``token_count`` with running totals), which the runner reads while Codex runs, so meters and
token budgets see every call, and after a kill (SIGINT first: SIGTERM loses the last record).
Errors: ``turn.failed`` (exit 1); a top-level ``error`` alone is a retry notice; an
``item.completed`` of type ``error`` is a warning Codex carries on after (an unknown model slug).
"""

from __future__ import annotations

from typing import ClassVar

import tomlkit

from ..usage import TokenUsage
from ..vocab import EventKind, ParsedEvent
from .base import HarnessAdapter, InstallSpec, LaunchContext, Recovery, StreamParser
from .jsonl import as_int, load_object, objects, tool_key

PROVIDER = "agentmeter"
KEY_VARIABLE = "AGENTMETER_CODEX_API_KEY"
RETRIES = 3  # request and stream retries: a failing provider must not hold a trial for minutes


def codex_usage(usage: dict) -> TokenUsage:
    return TokenUsage.from_inclusive(
        input_tokens=as_int(usage.get("input_tokens")), cached=as_int(usage.get("cached_input_tokens")),
        cache_write=as_int(usage.get("cache_write_input_tokens") or usage.get("cache_creation_input_tokens")),
        output_tokens=as_int(usage.get("output_tokens")), reasoning=as_int(usage.get("reasoning_output_tokens")))


def api_error_text(message: str) -> str:
    """Codex passes the provider's error body on as its message: show the error inside it."""
    body = load_object(message.encode()) if message.startswith("{") else None
    error = body.get("error") if body else None
    if isinstance(error, dict) and error.get("message"):
        return f"{error.get('type') or error.get('code') or 'error'}: {error['message']}"
    return message


class CodexParser(StreamParser):
    final_record = "turn.completed"

    def __init__(self) -> None:
        super().__init__()
        self.thread_id: str | None = None

    def feed(self, stream: str, line: bytes) -> list[ParsedEvent]:
        obj = load_object(line) if stream == "stdout" else None
        if obj is None:
            return [self.raw(line)]
        kind = obj.get("type")
        if kind in ("item.started", "item.updated", "item.completed"):
            return self._item(kind, obj.get("item") or {})
        if kind == "turn.completed":
            self.final_seen = True
            usage = obj.get("usage")
            event = self.set_total(codex_usage(usage)) if isinstance(usage, dict) else None
            return [event] if event is not None else [ParsedEvent(EventKind.SYSTEM, "turn completed")]
        if kind == "turn.failed":
            message = api_error_text((obj.get("error") or {}).get("message") or "turn failed")
            self.errors.append(message)
            return [ParsedEvent(EventKind.ERROR, message, is_error=True)]
        if kind == "error":  # "Reconnecting... 1/3" and the like; turn.failed follows if it is fatal
            return [ParsedEvent(EventKind.ERROR, api_error_text(str(obj.get("message") or "")), is_error=True)]
        if kind == "thread.started":
            self.thread_id = obj.get("thread_id")
            return [ParsedEvent(EventKind.SYSTEM, f"thread {self.thread_id}")]
        if kind == "turn.started":
            return [ParsedEvent(EventKind.SYSTEM, "turn started")]
        return [self.raw(line)]

    def _item(self, kind: str, item: dict) -> list[ParsedEvent]:
        itype = item.get("type")
        done = kind == "item.completed"
        if itype == "command_execution":
            command = str(item.get("command") or "")
            if kind == "item.started":
                self.tool_calls += 1
                return [ParsedEvent(EventKind.TOOL_CALL, command, tool_name="exec_command",
                                    tool_key=tool_key("exec_command", command))]
            if done:
                code = item.get("exit_code")
                return [ParsedEvent(EventKind.TOOL_RESULT, str(item.get("aggregated_output") or ""),
                                    is_error=code not in (0, None) or item.get("status") == "failed")]
        elif itype == "agent_message" and done:
            return [ParsedEvent(EventKind.ASSISTANT, str(item.get("text") or ""))]
        elif itype == "reasoning" and done:
            return [ParsedEvent(EventKind.REASONING, str(item.get("text") or ""))]
        elif itype in ("mcp_tool_call", "web_search", "file_change", "custom_tool_call") and kind == "item.started":
            name = str(item.get("tool") or item.get("name") or itype)
            arguments = item.get("arguments") or item.get("query") or item.get("changes") or {}
            self.tool_calls += 1
            return [ParsedEvent(EventKind.TOOL_CALL, str(arguments), tool_name=name,
                                tool_key=tool_key(name, arguments))]
        elif itype == "error":  # Codex carries on after these (e.g. no metadata for a model slug)
            return [ParsedEvent(EventKind.ERROR, str(item.get("message") or ""), is_error=True)]
        return [ParsedEvent(EventKind.SYSTEM, f"{kind}: {itype}")]


def recover_codex(files: dict[str, bytes]) -> Recovery | None:
    """Per-call usage from rollout files: one ``token_usage_record`` per response id; failing
    those (older builds), the largest running total of the ``token_count`` events, with the
    calls counted as the changes of that total (Codex re-emits an unchanged total)."""
    records: dict[str, TokenUsage] = {}
    best_total, total_changes, sources = TokenUsage(), 0, set()
    for name, obj in objects(files, (b'"token_usage_record"', b'"token_count"')):
        payload = obj.get("payload") or {}
        if obj.get("type") == "token_usage_record" and isinstance(payload.get("usage"), dict):
            key = str(payload.get("response_id") or f"{name}:{len(records)}")
            records[key] = codex_usage(payload["usage"])
            sources.add(name)
        elif payload.get("type") == "token_count" and isinstance(payload.get("info"), dict):
            total = payload["info"].get("total_token_usage")
            if isinstance(total, dict):
                found = codex_usage(total)
                if found.raw > best_total.raw:
                    best_total, total_changes = found, total_changes + 1
                    sources.add(name)
    per_call = Recovery.per_call(records, sources)
    if per_call is not None and per_call.usage.raw >= best_total.raw:
        return per_call
    if best_total:
        return Recovery(best_total, total_changes, "session:" + ", ".join(sorted(sources)))
    return None


class CodexAdapter(HarnessAdapter):
    name = "codex"
    protocol = "responses"
    install = InstallSpec("npm", "@openai/codex", "0.169.0", "codex", size_hint="404 MB",
                          native="node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
    shell_tool = "exec_command"  # arguments {cmd}
    session_reader = "agentmeter_tui.core.interop.sessions.codex:CodexSessions"
    harbor_names = ("codex",)
    probe_model = "gpt-5.5"  # it refuses a model name it does not know
    session_globs: ClassVar[list[str]] = [".codex/sessions/*/*/*/rollout-*.jsonl"]
    live_session_poll = 0.5

    def command(self, ctx: LaunchContext) -> list[str]:
        return [self.executable(ctx.clis_root), "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", *ctx.extra_args, "--", ctx.instruction]

    def environment(self, ctx: LaunchContext) -> dict[str, str]:
        return {"CODEX_HOME": f"{ctx.home}/.codex", KEY_VARIABLE: ctx.api_key}

    def home_files(self, ctx: LaunchContext) -> dict[str, bytes]:
        config = {
            "model": ctx.model_name, "model_provider": PROVIDER, "check_for_update_on_startup": False,
            "model_providers": {PROVIDER: {
                "name": PROVIDER, "base_url": ctx.base_url.rstrip("/") + "/v1", "env_key": KEY_VARIABLE,
                "wire_api": "responses", "request_max_retries": RETRIES, "stream_max_retries": RETRIES}},
            "analytics": {"enabled": False},
        }
        return {".codex/config.toml": tomlkit.dumps(config).encode()}

    def new_parser(self) -> CodexParser:
        return CodexParser()

    def recover(self, files: dict[str, bytes]) -> Recovery | None:
        return recover_codex(files)
