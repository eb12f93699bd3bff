"""Running the scripted model server: as a process (``serve``, used by ``agentmeter mockllm
serve`` and ``python -m agentmeter_tui.core.scripted``) or in a thread of the caller
(:class:`ThreadedServer`, for tests and tools that want no second process).

``serve`` prints exactly one line, ``listening on http://HOST:PORT``, once the socket accepts
connections, so a parent can ask for port 0 and read the address; it then serves until
SIGTERM or SIGINT and exits 0. The control endpoints' key comes on stdin (the runner's way:
it is then in no argument, environment or file anyone else can read) or from a file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Self

from aiohttp import web

from ..tomlerrors import InputError
from .app import create_app
from .control import new_control_key
from .options import add_arguments

SHUTDOWN_TIMEOUT = 0.5  # seconds given to open (possibly stalled) streams when stopping
PARENT_POLL = 0.5  # seconds between checks that the parent (--parent-pid) is alive


async def _start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT)
    await runner.setup()
    sock = socket.create_server((host, port))
    await web.SockSite(runner, sock).start()
    return runner, sock.getsockname()[1]


async def _watch_parent(pid: int, stop: asyncio.Event) -> None:
    # A parent killed with SIGKILL cannot stop us; once it is gone we are re-parented.
    while os.getppid() == pid:
        await asyncio.sleep(PARENT_POLL)
    stop.set()


async def serve(scenario: str | None, host: str, port: int, log_dir: str | None,
                parent_pid: int | None = None, control_key: str | None = None) -> int:
    app = create_app(scenario, log_dir, control_key)
    runner, port = await _start(app, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    watcher = asyncio.create_task(_watch_parent(parent_pid, stop)) if parent_pid else None
    print(f"listening on http://{host}:{port}", flush=True)
    await stop.wait()
    if watcher is not None:
        watcher.cancel()
    await runner.cleanup()
    return 0


def run(args: argparse.Namespace) -> int:
    """Handler of ``serve``: exit 0 on SIGTERM/SIGINT, 2 when the scenario or key file is bad."""
    try:
        control = _control_key(args)
        return asyncio.run(serve(args.scenario, args.host, args.port, args.log, args.parent_pid, control))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1


def _control_key(args: argparse.Namespace) -> str | None:
    if getattr(args, "control_key_stdin", False):
        line = sys.stdin.readline().strip()
    elif getattr(args, "control_key_file", None):
        try:
            line = Path(args.control_key_file).read_text(encoding="utf-8").partition("\n")[0].strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(args.control_key_file, None, None, f"cannot read the control key: {exc}") from None
    else:
        return None
    if len(line) < 16:
        raise InputError(getattr(args, "control_key_file", None) or "stdin", 1, None,
                         "the control key must be at least 16 characters")
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentmeter_tui.core.scripted",
                                     description="The scripted model server.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_arguments(sub.add_parser("serve", help="serve until SIGTERM/SIGINT"))
    return run(parser.parse_args(argv))


class ThreadedServer:
    """The server on its own event loop in a daemon thread; ``with ThreadedServer() as s: s.base_url``."""

    def __init__(self, scenario: str | Path | None = None, log_dir: str | Path | None = None,
                 host: str = "127.0.0.1", port: int = 0):
        self.control_key = new_control_key()
        self.app = create_app(scenario, log_dir, self.control_key)  # raises InputError here, in the caller's thread
        self._host, self._port = host, port
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mockllm", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        self.base_url = f"http://{host}:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._runner, self.port = self._loop.run_until_complete(_start(self.app, self._host, self._port))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the constructor's thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
