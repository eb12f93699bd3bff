"""The local sandbox: a fresh copy of the workspace seed and a fresh HOME per trial, under a
temporary root on this machine; the agent runs in its own session with a clean environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import procs
from ..lines import LineSplitter
from . import hostfs
from .base import (
    AgentHandle,
    ExecResult,
    KillPolicy,
    LaunchSpec,
    OutputCallback,
    Sandbox,
    SandboxSession,
    TrialSlot,
)

if TYPE_CHECKING:
    from ..suites import Task

_STREAMS = {1: "stdout", 2: "stderr"}
BASES = ("home", "workspace", "scratch")  # the folders under a trial's root that files go to and come from
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class _Protocol(asyncio.SubprocessProtocol):
    """Reads both pipes in large chunks and hands whole lines over in batches: far cheaper
    than a readline() per line when 64 agents print as fast as they can. While the store
    writer is behind, a pipe is not read (the agent blocks on it) until the writer catches up."""

    def __init__(self, on_output: OutputCallback):
        self.on_output = on_output
        self.splitters = {1: LineSplitter(), 2: LineSplitter()}
        self.open_pipes = {1, 2}
        self.pipes_closed = asyncio.get_running_loop().create_future()
        self.exited = asyncio.Event()
        self.transport: asyncio.SubprocessTransport | None = None
        self.held: set[int] = set()
        self.holding = True  # until the agent exits: then the rest of its pipes is read at once

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        lines = self.splitters[fd].feed(data)
        if lines:
            hold = self.on_output(_STREAMS[fd], lines)
            if hold is not None and self.holding and fd not in self.held and self.transport is not None:
                pipe = self.transport.get_pipe_transport(fd)
                if pipe is not None:
                    pipe.pause_reading()  # type: ignore[attr-defined]
                    self.held.add(fd)
                    hold.add_done_callback(lambda _, fd=fd: self._resume(fd))

    def _resume(self, fd: int) -> None:
        if fd in self.held:
            self.held.discard(fd)
            pipe = self.transport.get_pipe_transport(fd) if self.transport is not None else None
            if pipe is not None and not pipe.is_closing():
                pipe.resume_reading()  # type: ignore[attr-defined]

    def release(self) -> None:
        """Read the rest of the pipes whatever the writer's backlog (at most a pipe's buffer, plus
        what a leftover background job prints before the sweep)."""
        self.holding = False
        for fd in list(self.held):
            self._resume(fd)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        rest = self.splitters[fd].flush()
        if rest:
            self.on_output(_STREAMS[fd], rest)
        self.open_pipes.discard(fd)
        if not self.open_pipes and not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    def process_exited(self) -> None:
        self.exited.set()


class LocalAgent(AgentHandle):
    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _Protocol, token: str):
        self.transport, self.protocol, self.token = transport, protocol, token
        self.pid = transport.get_pid()

    async def wait(self) -> int:
        await self.protocol.exited.wait()
        self.protocol.release()
        try:
            # A background job the agent left behind may hold our pipes open; it is killed by
            # the session's cleanup, so don't wait long for the pipes to drain.
            await asyncio.wait_for(asyncio.shield(self.protocol.pipes_closed), 0.5)
        except TimeoutError:
            await asyncio.to_thread(procs.sweep, self.token)
            await asyncio.wait_for(asyncio.shield(self.protocol.pipes_closed), 5)
        code = self.transport.get_returncode()
        self.transport.close()
        procs.OWN_CHILDREN.pids.discard(self.pid)
        return code if code is not None else -1


class LocalSession(SandboxSession):
    def __init__(self, root: Path, token: str):
        self.root = root
        self.token = token
        self.workspace = str(root / "workspace")
        self.home = str(root / "home")
        self.scratch = str(root / "scratch")
        self.slot = TrialSlot("local")
        self.agent: LocalAgent | None = None
        self.owner: int | None = None  # docker's bind mode: the agent's uid gets what the runner writes

    def _base_env(self) -> dict[str, str]:
        return {
            "PATH": SYSTEM_PATH, "HOME": self.home, "PWD": self.workspace, "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8", "TERM": "dumb", "TMPDIR": str(self.root / "tmp"), "USER": _user(),
            "LOGNAME": _user(), procs.TOKEN_VAR: self.token,
        }

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        env = self._base_env()
        env.update(extra)
        env[procs.TOKEN_VAR] = self.token  # never overridable: the kill sweep depends on it
        return env

    async def start(self, spec: LaunchSpec, on_output: OutputCallback) -> AgentHandle:
        loop = asyncio.get_running_loop()
        cwd = spec.cwd or self.workspace
        env = self.environment({**spec.env, "PWD": cwd})
        procs.OWN_CHILDREN.spawning += 1
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(on_output), *spec.argv, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd, env=env,
                start_new_session=True)
            procs.OWN_CHILDREN.pids.add(transport.get_pid())
        finally:
            procs.OWN_CHILDREN.spawning -= 1
        self.agent = LocalAgent(transport, protocol, self.token)
        return self.agent

    async def exec(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                   timeout: float | None = None) -> ExecResult:
        started = time.monotonic()
        procs.OWN_CHILDREN.spawning += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=cwd or self.workspace, env=self.environment(env or {}),
                start_new_session=True)
            procs.OWN_CHILDREN.pids.add(proc.pid)
        finally:
            procs.OWN_CHILDREN.spawning -= 1
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
            timed_out = False
        except TimeoutError:
            await procs.kill_ladder(proc.pid, None, int_grace=0.2, grace=1.0)
            out, err = await proc.communicate()
            timed_out = True
        procs.OWN_CHILDREN.pids.discard(proc.pid)
        return ExecResult(proc.returncode if proc.returncode is not None else -1, out, err,
                          time.monotonic() - started, timed_out)

    async def kill(self, policy: KillPolicy) -> None:
        pid = self.agent.pid if self.agent else None
        exited = self.agent.protocol.exited if self.agent else None
        await procs.kill_ladder(pid, self.token, int_grace=policy.int_grace, grace=policy.grace, exited=exited)

    async def write_files(self, base: str, files: dict[str, bytes]) -> None:
        # Under the trial's root, whatever the agent planted there (hostfs.py); in docker's bind
        # mode what is made here is given to the agent's user (``owner``).
        for text in await asyncio.to_thread(hostfs.write_files, self.root, _base(base), files, self.owner):
            self.note(text)

    async def fetch_files(self, base: str, patterns: list[str], limit_bytes: int = 64 << 20) -> dict[str, bytes]:
        found, notes = await asyncio.to_thread(hostfs.read_globs, self.root, _base(base), patterns, limit_bytes)
        for text in notes:
            self.note(text)
        return found

    async def collect_workspace(self, dest: Path) -> Path:
        return Path(self.workspace)

    async def cleanup(self, keep: bool = False) -> None:
        # Leftovers of a finished agent (a backgrounded job) are killed by the runner's sweeper
        # within a fraction of a second; a kill already swept synchronously.
        procs.SWEEPER.add(self.token)
        if not keep:
            # Off the loop and off the trial's critical path: the slot is free meanwhile.
            procs.BACKGROUND.run(asyncio.to_thread(remove_root, self.root))


class LocalSandbox(Sandbox):
    name = "local"

    def __init__(self, suite: Any, settings: dict[str, Any] | None = None):
        super().__init__(suite, settings)
        root = self.settings.get("root") or os.environ.get("AGENTMETER_SANDBOX_ROOT")
        self.root = Path(root) if root else Path(tempfile.gettempdir()) / "agentmeter"
        self.root.mkdir(parents=True, exist_ok=True)

    async def open(self, task: Task, trial_id: int, token: str) -> LocalSession:
        seed = task.workspace_seed
        if seed is None or _small(seed):
            # A handful of mkdir/copy syscalls: cheaper on the loop than a hop to a thread.
            return self._open(task, trial_id, token)
        return await asyncio.to_thread(self._open, task, trial_id, token)

    def _open(self, task: Task, trial_id: int, token: str) -> LocalSession:
        root = Path(tempfile.mkdtemp(prefix=f"t{trial_id}-", dir=self.root))
        seed = task.workspace_seed
        if seed is not None:
            shutil.copytree(seed, root / "workspace", symlinks=True)
        else:
            (root / "workspace").mkdir()
        for name in ("home", "tmp", "scratch"):
            (root / name).mkdir()
        return LocalSession(root, token)


def _base(base: str) -> str:
    if base not in BASES:
        raise ValueError(f"no folder '{base}' in a trial: one of {', '.join(BASES)}")
    return base


def remove_root(root: Path) -> None:
    """A trial's root gone, whatever the agent left in it (``hostfs.remove_tree``)."""
    with contextlib.suppress(OSError):
        hostfs.remove_tree(root)


@functools.lru_cache(maxsize=256)
def _small(seed: Path, limit: int = 32) -> bool:
    """Whether a workspace seed is a few files (cached per task folder for the run)."""
    return sum(1 for _ in itertools.islice(seed.rglob("*"), limit + 1)) <= limit


@functools.cache
def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, ImportError):
        return "agent"
