"""Reference agent: ``python agent.py --model M INSTRUCTION``.

Talks OpenAI Chat Completions (streaming, with usage) to ``$REFAGENT_BASE_URL`` using
``$REFAGENT_API_KEY``; offers one tool, ``shell``; prints one JSON object per line:
``init``, ``reasoning``, ``assistant``, ``tool_call``, ``tool_result``, ``usage`` (the API's raw
usage object for each call), ``error`` and a final ``result``. Like the real CLIs it starts
tool shells in their own session, and on SIGINT it prints its result before exiting, so the
runner's kill handling is exercised the same way. Stdlib only: this file runs on its own.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import Any

SYSTEM_PROMPT = (
    "You are a coding agent working in a workspace folder. Use the shell tool to inspect and change "
    "files. When the task is done, answer with a short summary and no tool call."
)
SHELL_TOOL = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a shell command in the workspace and return its output and exit code.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command line for sh -c"}},
            "required": ["command"],
        },
    },
}
MAX_TOOL_OUTPUT = 20_000


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


class ApiError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status, self.body = status, body


def stream_chat(base_url: str, api_key: str, payload: dict, timeout: float) -> dict:
    """One streamed Chat Completions call; returns the assembled message and the usage."""
    url = urllib.parse.urlsplit(base_url.rstrip("/") + "/chat/completions")
    if not url.hostname:  # http.client would fail on None with an AttributeError that names nothing
        raise ValueError(f"no host in the base URL {base_url!r}")
    conn_cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(url.hostname, url.port, timeout=timeout)
    body = json.dumps(payload).encode()
    conn.request("POST", url.path, body, {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}",
                                          "Accept": "text/event-stream"})
    response = conn.getresponse()
    if response.status != 200:
        raise ApiError(response.status, response.read().decode("utf-8", "replace"))
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}  # a tool call's index -> its id, name and arguments so far
    usage, done = None, False
    for raw in response:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            if delta.get("reasoning_content"):
                reasoning.append(delta["reasoning_content"])
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call.get("index", 0), {"id": None, "name": "", "arguments": ""})
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
    conn.close()
    if not done:  # the connection ended mid-answer: a cut stream is not an answer
        raise ConnectionError("the stream ended before [DONE]")
    return {"text": "".join(text), "reasoning": "".join(reasoning),
            "tool_calls": [calls[i] for i in sorted(calls)], "usage": usage}


def run_shell(command: str, cwd: str, timeout: float) -> tuple[int, str]:
    # Output goes to a file, not a pipe: a job the command backgrounds must not keep us waiting.
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.run(["/bin/sh", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True, timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = 124
        out.seek(0)
        data = out.read(MAX_TOOL_OUTPUT + 1)
    text = data.decode("utf-8", "replace")
    if len(data) > MAX_TOOL_OUTPUT:
        text = text[:MAX_TOOL_OUTPUT] + "\n[output truncated]"
    return code, text


def _assistant_message(reply: dict, turn: int) -> dict:
    """The model's reply told (reasoning, text, usage) and kept as the conversation's next message."""
    if reply["reasoning"]:
        emit({"type": "reasoning", "text": reply["reasoning"]})
    if reply["text"]:
        emit({"type": "assistant", "text": reply["text"]})
    if reply["usage"] is not None:
        emit({"type": "usage", "call": turn, "usage": reply["usage"]})
    message: dict = {"role": "assistant", "content": reply["text"] or None}
    if reply["tool_calls"]:
        message["tool_calls"] = [
            {"id": c["id"] or f"call_{turn}_{i}", "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for i, c in enumerate(reply["tool_calls"])]
    return message


def _tool_turn(call: dict, cwd: str, timeout: float) -> dict:
    """One tool call run and told; its result as the conversation's tool message."""
    name, raw_args = call["function"]["name"], call["function"]["arguments"]
    try:
        arguments = json.loads(raw_args or "{}")
    except json.JSONDecodeError:
        arguments = {}
    emit({"type": "tool_call", "id": call["id"], "name": name, "arguments": arguments})
    started = time.monotonic()
    if name != "shell" or not isinstance(arguments.get("command"), str):
        code, output = 127, f"unknown tool or bad arguments: {name} {raw_args}"
    else:
        code, output = run_shell(arguments["command"], cwd, timeout)
    emit({"type": "tool_result", "id": call["id"], "exit_code": code, "output": output,
          "seconds": round(time.monotonic() - started, 3)})
    return {"role": "tool", "tool_call_id": call["id"], "content": f"exit code {code}\n{output}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="refagent")
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-turns", type=int, default=200)
    parser.add_argument("--tool-timeout", type=float, default=600)
    parser.add_argument("instruction")
    args = parser.parse_args(argv)
    base_url = os.environ.get("REFAGENT_BASE_URL", "http://127.0.0.1:8000/v1")
    api_key = os.environ.get("REFAGENT_API_KEY", "")
    cwd = os.getcwd()
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": args.instruction}]
    turns = tool_calls = 0
    emit({"type": "init", "model": args.model, "cwd": cwd, "pid": os.getpid()})
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while turns < args.max_turns:
            payload = {"model": args.model, "messages": messages, "tools": [SHELL_TOOL], "stream": True,
                       "stream_options": {"include_usage": True}}
            try:
                reply = stream_chat(base_url, api_key, payload, timeout=600)
            except ApiError as exc:
                emit({"type": "error", "status": exc.status, "message": exc.body[:2000]})
                emit({"type": "result", "status": "error", "turns": turns, "tool_calls": tool_calls})
                return 1
            except OSError as exc:
                emit({"type": "error", "status": None, "message": f"connection failed: {exc}"})
                emit({"type": "result", "status": "error", "turns": turns, "tool_calls": tool_calls})
                return 1
            turns += 1
            message = _assistant_message(reply, turns)
            messages.append(message)
            if not reply["tool_calls"]:
                emit({"type": "result", "status": "success", "turns": turns, "tool_calls": tool_calls})
                return 0
            for call in message["tool_calls"]:
                tool_calls += 1
                messages.append(_tool_turn(call, cwd, args.tool_timeout))
        emit({"type": "error", "status": None, "message": f"stopped after {args.max_turns} turns"})
        emit({"type": "result", "status": "max_turns", "turns": turns, "tool_calls": tool_calls})
        return 1
    except KeyboardInterrupt:
        emit({"type": "result", "status": "interrupted", "turns": turns, "tool_calls": tool_calls})
        return 130


if __name__ == "__main__":
    sys.exit(main())
