"""A real headless Chromium driven over the DevTools protocol (aiohttp's websocket client, which
the project already depends on): pages loaded from file://, console messages and uncaught
exceptions collected, JavaScript evaluated in the page, load times measured."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

# The flags this machine kind needs (research: machine.md): no sandbox as root, no GPU, and no
# background networking, whose connections the closed network refuses many at a time.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--mute-audio", "--remote-debugging-port=0", "--window-size=1400,1000"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Browser:
    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="agentmeter-chromium-")
        path = chromium_path()
        if path is None:
            raise RuntimeError("chromium is not installed (Debian package chromium; .ci/run installs it)")
        self.process = subprocess.Popen([path, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ids = itertools.count(1)
        self.console: list[dict[str, Any]] = []
        self.exceptions: list[dict[str, Any]] = []
        self.events: asyncio.Queue = asyncio.Queue()

    async def start(self) -> None:
        active = Path(self.profile) / "DevToolsActivePort"
        while not active.is_file() or not active.read_text().strip():  # written once chromium listens
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}")
            await asyncio.sleep(0.05)
        port = int(active.read_text().split()[0])
        self.http = aiohttp.ClientSession()
        async with self.http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as response:
            target = json.loads(await response.text())
        self.ws = await self.http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        self.pending: dict[int, asyncio.Future] = {}
        self.reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime", "Log"):
            await self.send(f"{domain}.enable")

    async def _read(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif data.get("method") == "Runtime.consoleAPICalled":
                self.console.append(data["params"])
            elif data.get("method") == "Runtime.exceptionThrown":
                self.exceptions.append(data["params"])
            elif data.get("method") == "Log.entryAdded":
                self.console.append(data["params"]["entry"])
            elif "method" in data:
                await self.events.put(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        n = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.pending[n] = future
        await self.ws.send_str(json.dumps({"id": n, "method": method, "params": params}))
        reply = await future
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def open(self, url: str) -> float:
        """Navigate and wait for the load event; the seconds it took."""
        while not self.events.empty():
            self.events.get_nowait()
        started = time.perf_counter()
        await self.send("Page.navigate", url=url)
        while (await self.events.get())["method"] != "Page.loadEventFired":
            pass
        return time.perf_counter() - started

    async def js(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, failed loads and uncaught exceptions so far."""
        found = [str(e.get("exceptionDetails", e)) for e in self.exceptions]
        for entry in self.console:
            level = entry.get("level") or entry.get("type")
            if level in ("error", "assert"):
                found.append(str(entry.get("text") or entry.get("args")))
        return found

    async def close(self) -> None:
        if hasattr(self, "reader"):
            self.reader.cancel()
            await self.ws.close()
            await self.http.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def file_url(path: Path) -> str:
    return Path(os.path.abspath(path)).as_uri()
