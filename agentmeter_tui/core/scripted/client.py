"""Using the scripted model server from Python: start it as a separate process, register a
session for an API key, read back what a session was served.

Only the standard library is imported here (``urllib``, ``subprocess``): the runner calls
these on its hot path and must not pay for aiohttp. The server runs in its own process so it
never competes with the runner for the GIL; :func:`run_in_thread` is the in-process variant
for tests.

The control endpoints need the server's control key: :func:`start_server_process` draws one
(``secrets``), hands it to the server on its stdin and keeps it as ``ServerProcess.control_key``;
every control call here takes it as ``control``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Self

from .control import CONTROL_HEADER, new_control_key

_PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder holding agentmeter_tui/
READY_PREFIX = "listening on "


class ServerError(RuntimeError):
    """The server could not start, or a control request failed (message from the server)."""


class ServerProcess:
    """A running ``python -m agentmeter_tui.core.scripted serve``; stop it or use ``with``."""

    def __init__(self, process: subprocess.Popen, base_url: str, control_key: str):
        self.process, self.base_url = process, base_url
        self.control_key = control_key  # opens its control endpoints: the runner's alone

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 5.0) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        return self.process.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server_process(scenario: str | Path | None = None, log_dir: str | Path | None = None, *,
                         host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> ServerProcess:
    """Spawn the server and wait for its ``listening on`` line; raises :class:`ServerError`."""
    command = [sys.executable, "-m", "agentmeter_tui.core.scripted", "serve", "--host", host, "--port", str(port),
               "--parent-pid", str(os.getpid()),  # it exits if we die, even by SIGKILL
               "--control-key-stdin"]
    control_key = new_control_key()
    if scenario is not None:
        command += ["--scenario", str(Path(scenario).resolve())]
    if log_dir is not None:
        command += ["--log", str(Path(log_dir).resolve())]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), env.get("PYTHONPATH")]))
    # stderr to a file, not a pipe: nobody drains it while the server runs for hours.
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                   env=env)
        assert process.stdin is not None
        try:  # the key on stdin: in no argument or environment another process could read
            process.stdin.write(control_key.encode() + b"\n")
            process.stdin.close()
        except OSError:  # it died at once: its stderr says why
            pass
        line = _read_line(process, timeout)
        if not line.startswith(READY_PREFIX):
            if process.poll() is None:
                process.kill()
            process.wait()
            errors.seek(0)
            detail = errors.read().decode("utf-8", "replace").strip() or line or "no output"
            raise ServerError(f"scripted model server did not start: {detail}")
    return ServerProcess(process, line[len(READY_PREFIX):].strip(), control_key)


def _read_line(process: subprocess.Popen, timeout: float) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    if not ready:
        return ""
    return process.stdout.readline().decode("utf-8", "replace").strip()


def _request(base_url: str, method: str, path: str, payload: Any = None, timeout: float = 10.0,
             control: str | None = None) -> Any:
    data = json.dumps(payload).encode() if payload is not None else None
    headers = {"Content-Type": "application/json"}
    if control is not None:
        headers[CONTROL_HEADER] = control
    request = urllib.request.Request(base_url.rstrip("/") + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except (ValueError, AttributeError):
            message = exc.reason
        raise ServerError(f"{method} {path}: HTTP {exc.code}: {message}") from None


def _key_path(key: str) -> str:
    return "/_scripted/sessions/" + urllib.parse.quote(key, safe="")


def register_session(base_url: str, key: str, scenario_path: str | Path, label: str | None = None, *,
                     control: str) -> dict:
    """Make ``key`` play ``scenario_path`` from its first turn (a re-registration starts over).
    The file is read here and its text sent: the server opens no path a request names."""
    path = Path(scenario_path).resolve()
    payload = {"key": key, "scenario": str(path), "toml": path.read_text(encoding="utf-8")}
    if label:
        payload["label"] = label
    return _request(base_url, "POST", "/_scripted/sessions", payload, control=control)


def session_info(base_url: str, key: str, *, control: str) -> dict:
    """Scenario, calls served (each with its usage in the five classes) and the summed ``usage``."""
    return _request(base_url, "GET", _key_path(key), control=control)


def session_requests(base_url: str, key: str, *, control: str) -> list[dict]:
    return _request(base_url, "GET", _key_path(key) + "/requests", control=control)["requests"]


def forget_session(base_url: str, key: str, *, control: str) -> None:
    _request(base_url, "DELETE", _key_path(key), control=control)


def wait_healthy(base_url: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _request(base_url, "GET", "/_scripted/health", timeout=1.0)
            return
        except (OSError, ServerError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def run_in_thread(scenario: str | Path | None = None, log_dir: str | Path | None = None):
    """The server in a daemon thread of this process (tests); returns a ``ThreadedServer``."""
    from .server import ThreadedServer

    return ThreadedServer(scenario, log_dir)
