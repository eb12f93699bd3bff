"""Helpers shared by the scripted model server tests: start the app on a test server, write
scenarios, post model calls and parse SSE streams."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from agentmeter_tui.core.scripted.app import CONTROL, create_app
from agentmeter_tui.core.scripted.control import CONTROL_HEADER

SHELL_SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
TWO_TURNS = """
description = "a shell call, then a final answer"
[[turns]]
reasoning = "I should write the file."
text = "Writing the file."
shell = "echo hi > out.txt"
usage = { uncached_input = 1200, cached_input = 4000, cache_write = 300, output = 30, reasoning = 20 }
[[turns]]
text = "Done."
usage = { uncached_input = 1300, cached_input = 4500, output = 80, reasoning = 25 }
"""
TURN1 = {"uncached_input": 1200, "cached_input": 4000, "cache_write": 300, "output": 30, "reasoning": 20}


def write_scenario(folder: Path, text: str, name: str = "scenario.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


async def start_server(scenario: Path | None = None, log_dir: Path | None = None) -> TestServer:
    server = TestServer(create_app(scenario, log_dir))
    await server.start_server(shutdown_timeout=0.2)  # handler_cancellation is on in tests
    return server


def parse_sse(text: str) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) per SSE frame; ``[DONE]`` stays a string."""
    frames = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            joined = "\n".join(data)
            frames.append((event, joined if joined == "[DONE]" else json.loads(joined)))
    return frames


async def post(server: TestServer, path: str, body: dict[str, Any], key: str | None = "k1",
               header: str = "authorization") -> tuple[int, dict[str, str], str]:
    headers = {}
    if key is not None:
        headers[header] = f"Bearer {key}" if header == "authorization" else key
    async with aiohttp.ClientSession() as client, \
            client.post(server.make_url(path), json=body, headers=headers) as response:
        return response.status, {k.lower(): v for k, v in response.headers.items()}, await response.text()


def control(server: TestServer) -> dict[str, str]:
    """The header that opens the server's control endpoints (the runner's key)."""
    return {CONTROL_HEADER: server.app[CONTROL]}


async def get_json(server: TestServer, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession(headers=control(server)) as client, \
            client.get(server.make_url(path)) as response:
        return response.status, await response.json()


def registration(key: str, scenario: Path, label: str | None = None) -> dict[str, Any]:
    """A session's registration as the runner sends it: the scenario's text, never a path to open."""
    body = {"key": key, "scenario": str(scenario), "toml": scenario.read_text(encoding="utf-8")}
    return {**body, "label": label} if label else body


async def register(server: TestServer, key: str, scenario: Path, label: str | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession(headers=control(server)) as client, \
            client.post(server.make_url("/_scripted/sessions"), json=registration(key, scenario, label)) as response:
        return response.status, await response.json()


def chat_body(stream: bool = True, tools: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "shell", "parameters": SHELL_SCHEMA}}]
    return {**body, **extra}
