"""What the docker, ssh and swarm sandboxes share: their settings' loading (errors name the
suite file, line and field), the trial environment, and the files we ship into a sandbox.

Files on the runner that an adapter's command names (the reference agent's script) do not
exist inside a container or on a remote host; each sandbox copies them to its own ``tools``
folder and :func:`map_argv` rewrites the command line to point there.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationInfo

from .. import procs
from ..harnesses.reference import AGENT_FILE
from ..tomlerrors import InputError, load_toml, validate

if TYPE_CHECKING:
    from ..run.placement import Placement
    from ..suites.suite import Suite
    from .base import OutputCallback

M = TypeVar("M", bound=BaseModel)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# runner path -> path relative to the sandbox's trial root
SHIPPED = {str(AGENT_FILE): "tools/refagent.py"}


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


def resolve_path(value: str | None, info: ValidationInfo) -> str | None:
    """A path from the suite file, relative to the suite folder; ``~`` expanded."""
    if value is None:
        return None
    path = Path(value).expanduser()
    base = (info.context or {}).get("base")
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    return str(path)


def load_settings(model: type[M], suite: Suite, settings: dict[str, Any]) -> M:
    path = suite.path / "suite.toml"
    try:
        _, text = load_toml(path)
    except InputError:  # a suite built in memory: errors then name no line
        text = ""
    return validate(model, settings, path, text, prefix=("sandbox",), context={"base": suite.path})


def trial_env(*, home: str, workspace: str, tmp: str, token: str, user: str = "agent",
              extra: dict[str, str] | None = None) -> dict[str, str]:
    """The complete environment of a process in the sandbox; the token cannot be overridden."""
    env = {"PATH": SYSTEM_PATH, "HOME": home, "PWD": workspace, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "TERM": "dumb", "TMPDIR": tmp, "USER": user, "LOGNAME": user, "PYTHONDONTWRITEBYTECODE": "1"}
    env.update(extra or {})
    env[procs.TOKEN_VAR] = token
    return env


def shipped_files() -> dict[str, bytes]:
    """The files to place under the trial root (relative path -> content)."""
    return {rel: Path(src).read_bytes() for src, rel in SHIPPED.items() if Path(src).is_file()}


def map_argv(argv: list[str], root: str) -> list[str]:
    return [f"{root}/{SHIPPED[a]}" if a in SHIPPED else a for a in argv]


class HostWatch:
    """Re-probes hosts that went down and marks them up again when a probe succeeds."""

    def __init__(self, placement: Placement, probe: Callable[[str], Awaitable[None]], interval: float):
        self.placement, self.probe, self.interval = placement, probe, interval
        self.tasks: dict[str, asyncio.Task] = {}

    def down(self, host: str, reason: str) -> None:
        self.placement.mark_down(host, reason)
        if host not in self.tasks or self.tasks[host].done():
            self.tasks[host] = asyncio.get_running_loop().create_task(self._reprobe(host))

    async def _reprobe(self, host: str) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await asyncio.wait_for(self.probe(host), max(5.0, self.interval))
            except Exception:  # noqa: BLE001, S112 - any failure means: still down, probe again later
                continue
            self.placement.mark_up(host)
            return

    async def close(self) -> None:
        for task in self.tasks.values():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class ThreadOutput:
    """Hands output lines read on a thread (a docker exec's stream, a swarm job's logs) to the
    trial on the event loop, with at most ``slots`` batches on their way: the reading thread
    waits while the loop is behind or while the trial holds output back (the store writer is
    behind, see ``OutputCallback``), so neither the loop's queue nor the store's backlog grows
    without bound however fast the agent prints."""

    def __init__(self, on_output: OutputCallback, loop: asyncio.AbstractEventLoop, slots: int = 4):
        self.on_output, self.loop = on_output, loop
        self._slots = threading.BoundedSemaphore(slots)

    def emit(self, stream: str, lines: list[bytes]) -> None:
        """On the reading thread."""
        if lines:
            self._slots.acquire()
            try:
                self.loop.call_soon_threadsafe(self._deliver, stream, lines)
            except RuntimeError:  # the loop is closed: the trial that read these lines is over
                self._slots.release()

    def _deliver(self, stream: str, lines: list[bytes]) -> None:
        try:
            hold = self.on_output(stream, lines)
        except BaseException:
            self._slots.release()
            raise
        if hold is None:
            self._slots.release()
        else:
            hold.add_done_callback(lambda _: self._slots.release())
