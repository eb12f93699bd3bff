"""Adapter for opencode 1.18.33 (``opencode run --format json``).

The model is a custom provider in ``$HOME/.config/opencode/opencode.json`` through the
bundled ``@ai-sdk/openai-compatible`` package (Chat Completions at the base URL), with the
suite's snapshot prices as its ``cost`` table, so its per-step cost is priced like ours.

Stream: ``step_start``, ``reasoning`` (with ``--thinking``), ``text``, ``tool_use`` (printed
only once the tool has finished, input and output together), ``step_finish`` (one per model
call, with that call's ``tokens`` and ``cost``), ``error``. There is no session total and no
end record: the stream simply stops. Per step, ``input`` excludes cache reads, ``output``
excludes reasoning, ``reasoning`` is its own figure; through Chat Completions there is no
cache-write figure, so cache writes arrive inside ``input`` (``merged_classes``).

Choices that keep the numbers whole: ``--title`` names the session, which skips the
title-generation call opencode otherwise makes first and never reports (its tokens would be
billed but invisible); ``OPENCODE_PURE`` and a dead npm registry keep it from fetching
plugins from the internet at startup; ``PWD`` and ``--dir`` are the workspace (opencode takes
its directory from ``$PWD``, not from the process's working directory).

Kill: SIGINT and SIGTERM are unreliable (ignored while a model stream stalls, in about four
of ten tries during a tool); the kill ladder's SIGKILL covers it. Usage after a kill: each
finished step is already on stdout, and the step cut off by the kill is lost everywhere
(its ``opencode.db`` row holds zeros), so there are no session files to recover from.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import ClassVar

from ..usage import TokenUsage
from ..vocab import EventKind, ParsedEvent
from .base import AgentOutcome, HarnessAdapter, InstallSpec, LaunchContext, StreamParser
from .jsonl import as_int, load_object, tool_key, tool_text
from .qwen_code import safe_positional

PROVIDER = "agentmeter"  # the provider id in opencode.json
TITLE = "agentmeter trial"
DEAD_REGISTRY = "http://127.0.0.1:9/"  # discard port: any npm fetch fails at once, offline or not


def step_usage(tokens: dict) -> TokenUsage:
    cache = sub if isinstance(sub := tokens.get("cache"), dict) else {}
    return TokenUsage(uncached_input=as_int(tokens.get("input")), cached_input=as_int(cache.get("read")),
                      cache_write=as_int(cache.get("write")), output=as_int(tokens.get("output")),
                      reasoning=as_int(tokens.get("reasoning")))


class OpencodeParser(StreamParser):
    def __init__(self) -> None:
        super().__init__()
        self._steps: set[str] = set()  # step_finish part ids already counted
        self._cost = Decimal(0)

    def feed(self, stream: str, line: bytes) -> list[ParsedEvent]:
        obj = load_object(line) if stream == "stdout" else None
        if obj is None:
            return [self.raw(line)]
        kind = obj.get("type")
        part = sub if isinstance(sub := obj.get("part"), dict) else {}
        if kind == "text":
            return [ParsedEvent(EventKind.ASSISTANT, str(part.get("text") or ""))]
        if kind == "reasoning":
            return [ParsedEvent(EventKind.REASONING, str(part.get("text") or ""))]
        if kind == "tool_use":
            return self._tool(part)
        if kind == "step_finish":
            return self._step_finish(part)
        if kind == "step_start":
            return [ParsedEvent(EventKind.SYSTEM, f"step: session {obj.get('sessionID')}")]
        if kind == "error":
            return [self._error(obj.get("error"))]
        return [self.raw(line)]

    def _tool(self, part: dict) -> list[ParsedEvent]:
        name = str(part.get("tool") or "?")
        state = sub if isinstance(sub := part.get("state"), dict) else {}
        arguments = state.get("input") or {}
        self.tool_calls += 1
        call = ParsedEvent(EventKind.TOOL_CALL, tool_text(arguments), tool_name=name, tool_key=tool_key(name, arguments))
        metadata = sub if isinstance(sub := state.get("metadata"), dict) else {}
        exit_code = metadata.get("exit")
        failed = state.get("status") == "error" or (isinstance(exit_code, int) and exit_code != 0)
        output = state.get("output") if state.get("status") != "error" else state.get("error")
        return [call, ParsedEvent(EventKind.TOOL_RESULT, str(output or ""), tool_name=name, is_error=failed)]

    def _step_finish(self, part: dict) -> list[ParsedEvent]:
        step_id = str(part.get("id") or part.get("messageID") or len(self._steps))
        tokens = part.get("tokens")
        if step_id in self._steps or not isinstance(tokens, dict):  # a repeated step is counted once
            return [ParsedEvent(EventKind.SYSTEM, f"step finished: {part.get('reason')}")]
        self._steps.add(step_id)
        if part.get("reason") == "stop":
            self.final_seen = True
        try:
            self._cost += Decimal(str(part.get("cost") or 0))
        except InvalidOperation:
            pass
        # A cost of 0 over real tokens means no price was configured: no figure, not a free run.
        self.reported_cost_usd = self._cost if self._cost > 0 else None
        event = self.add_usage(step_usage(tokens), turns=1)
        event.reported_cost_usd = self.reported_cost_usd
        return [event]

    def _error(self, error: object) -> ParsedEvent:
        error = error if isinstance(error, dict) else {"data": {"message": str(error)}}
        data = sub if isinstance(sub := error.get("data"), dict) else {}
        status = data.get("statusCode")
        message = str(data.get("message") or error.get("name") or "error")
        text = f"{error.get('name') or 'error'}{f' (HTTP {status})' if status else ''}: {message}"
        self.errors.append(text)
        return ParsedEvent(EventKind.ERROR, text, is_error=True)

    def outcome(self, exit_code: int | None, killed: bool) -> AgentOutcome:
        verdict = super().outcome(exit_code, killed)
        if not killed and not verdict.errored and not self.turns:  # no end record: a silent exit 0
            return AgentOutcome(True, "ended without a finished step")
        return verdict


class OpencodeAdapter(HarnessAdapter):
    name = "opencode"
    protocol = "chat"
    install = InstallSpec("npm", "opencode-ai", "1.18.33", "opencode", size_hint="354 MB")
    shell_tool = "bash"  # arguments {command, description}
    session_reader = "agentmeter_tui.core.interop.sessions.opencode:OpencodeSessions"
    harbor_names = ("opencode",)
    # Through Chat Completions a cache write is part of the step's ``input``.
    merged_classes: ClassVar[dict[str, str]] = {"cache_write": "uncached_input"}

    def command(self, ctx: LaunchContext) -> list[str]:
        return [self.executable(ctx.clis_root), "run", "--format", "json", "--thinking", "--title", TITLE,
                "--dir", ctx.workspace, "-m", f"{PROVIDER}/{ctx.model_name}", *ctx.extra_args,
                safe_positional(ctx.instruction)]

    def environment(self, ctx: LaunchContext) -> dict[str, str]:
        switches = ("MODELS_FETCH", "AUTOUPDATE", "SHARE", "CLAUDE_CODE", "DEFAULT_PLUGINS", "LSP_DOWNLOAD",
                    "PROJECT_CONFIG")  # PROJECT_CONFIG: a task's own opencode.json must not swap the model
        env = {f"OPENCODE_DISABLE_{switch}": "1" for switch in switches}
        env.update({"OPENCODE_PURE": "1", "npm_config_registry": DEAD_REGISTRY, "PWD": ctx.workspace,
                    "AGENTMETER_OPENCODE_KEY": ctx.api_key})  # read by the config's {env:...}
        return env

    def home_files(self, ctx: LaunchContext) -> dict[str, bytes]:
        model: dict = {"name": ctx.model_name, "limit": {"context": 200_000, "output": 32_000}}
        if ctx.price:
            # Per million tokens, as in the suite's snapshot; reasoning is billed at the output price.
            names = {"input": "input", "output": "output", "cached_input": "cache_read", "cache_write": "cache_write"}
            model["cost"] = {names[k]: float(v) for k, v in ctx.price.items() if k in names}
        base = ctx.base_url.rstrip("/") + "/v1" if ctx.base_url else ""
        provider = {"npm": "@ai-sdk/openai-compatible", "name": PROVIDER,
                    "options": {"baseURL": base, "apiKey": "{env:AGENTMETER_OPENCODE_KEY}"},
                    "models": {ctx.model_name: model}}
        config = {"provider": {PROVIDER: provider}, "model": f"{PROVIDER}/{ctx.model_name}",
                  "small_model": f"{PROVIDER}/{ctx.model_name}", "autoupdate": False, "share": "disabled",
                  "permission": {"*": "allow", "bash": "allow", "edit": "allow"}}
        return {".config/opencode/opencode.json": json.dumps(config, indent=2).encode()}

    def new_parser(self) -> OpencodeParser:
        return OpencodeParser()
