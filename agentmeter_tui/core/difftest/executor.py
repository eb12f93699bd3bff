"""Case executors: build one side of a differential test (oracle or candidate) and run cases.

An executor owns one side. ``build`` installs the tool from a source folder with the task's
install command (the funnel's Build); ``run`` executes one case in a fresh workspace made from
the case's files, with a fresh HOME and TMPDIR, and returns the exit code, stdout, stderr, wall
time and the side effects on the workspace. Both sides of a test get executors made with the
same settings, so they differ only in the tool they run.

:class:`LocalExecutor` runs on this machine, each case in a new temporary folder. A docker-backed
executor (``sandboxes/docker/difftest.py``) builds and runs each side in containers of the trial's
image; a sandbox kind names its own executor (``Sandbox.differential_side``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

from ..procs import OWN_CHILDREN
from ..sandboxes.hostfs import remove_tree
from .cases import Case, FileSpec, place_files
from .snapshot import SideEffects, snapshot

OUTPUT_LIMIT = 1 << 20  # bytes of stdout/stderr kept per case; a runaway printer is cut off here


@dataclass
class BuildResult:
    ok: bool
    exit_code: int | None = None
    output: str = ""  # the install command's output, for the reviewer
    duration: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "exit_code": self.exit_code, "output": self.output[-4000:],
                "duration": round(self.duration, 4)}


@dataclass
class CaseRun:
    exit_code: int | None  # None: timed out
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0
    side_effects: SideEffects = field(default_factory=SideEffects)
    timed_out: bool = False

    def behaviour(self) -> tuple:
        """What must repeat for a case to be stable: exit code, stdout, side effects."""
        return (self.exit_code, self.stdout, self.side_effects.as_dict())


@dataclass(frozen=True)
class ToolCommand:
    """How a side is installed and invoked. ``{tool}`` and ``{python}`` are filled in per side."""

    run: str
    install: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    case_timeout: float = 10.0
    build_timeout: float = 300.0

    def fill(self, template: str, tool: Path, python: str = sys.executable) -> str:
        """``{python}``: the interpreter running agentmeter here, the image's ``python3`` in a sandbox."""
        return template.replace("{tool}", shlex.quote(str(tool))).replace("{python}", shlex.quote(python))


class SideError(RuntimeError):
    """A side could not run its cases (its container or batch runner failed): our failure."""


def case_env(path: str, extra: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """The environment of every case on both sides, but HOME and TMPDIR (each case's own)."""
    env = {"PATH": path, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1", "TERM": "dumb"}
    env.update(dict(extra))
    return env


class CaseExecutor(ABC):
    """One side of a differential test.

    ``batch_size`` is how many cases the evaluator hands ``run_batch`` at once: 1 where a case
    is cheapest on its own (this machine), more where each call has a fixed cost (an exec in
    a container); 0 means "split the cases evenly over the jobs".
    """

    batch_size: int = 1

    @abstractmethod
    async def build(self, source: Path) -> BuildResult: ...

    @abstractmethod
    async def run(self, case: Case, files: list[FileSpec]) -> CaseRun: ...

    async def run_batch(self, items: list[tuple[Case, list[FileSpec]]]) -> list[CaseRun]:
        """Run cases one after another; the evaluator runs several batches at once."""
        return [await self.run(case, files) for case, files in items]

    async def close(self) -> None:
        """Release what the side holds (temporary folders, a container)."""


async def _read_capped(stream: asyncio.StreamReader, limit: int = OUTPUT_LIMIT) -> bytes:
    kept = bytearray()
    while chunk := await stream.read(1 << 16):
        if len(kept) < limit:
            kept += chunk[: limit - len(kept)]
    return bytes(kept)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], stdin: bytes | None,
                      timeout: float, shell: bool = False) -> tuple[int | None, bytes, bytes, float]:
    """Run to completion in its own process group; on timeout kill the group. Exit 127 if not found."""
    started = time.perf_counter()
    # Inside the runner (a child subreaper that reaps stray zombies), a child must be registered
    # as our own, or its exit status can be reaped away from asyncio (which then reports 255).
    OWN_CHILDREN.spawning += 1
    try:
        if shell:
            proc = await asyncio.create_subprocess_shell(
                argv[0], cwd=cwd, env=env, start_new_session=True, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        else:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, env=env, start_new_session=True, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        OWN_CHILDREN.pids.add(proc.pid)
    except (FileNotFoundError, PermissionError) as exc:
        return 127, b"", f"{exc}\n".encode(), time.perf_counter() - started
    finally:
        OWN_CHILDREN.spawning -= 1
    try:
        return await _communicate(proc, stdin, timeout, started)
    finally:
        OWN_CHILDREN.pids.discard(proc.pid)


async def _communicate(proc: asyncio.subprocess.Process, stdin: bytes | None, timeout: float,
                       started: float) -> tuple[int | None, bytes, bytes, float]:
    pipe = proc.stdin
    assert pipe and proc.stdout and proc.stderr

    async def feed() -> None:
        try:
            if stdin:
                pipe.write(stdin)
                await pipe.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the tool did not read its input: that is its business
        finally:
            pipe.close()

    gathered = asyncio.gather(feed(), _read_capped(proc.stdout), _read_capped(proc.stderr), proc.wait())
    try:
        _, out, err, code = await asyncio.wait_for(gathered, timeout)
        return code, out, err, time.perf_counter() - started
    except TimeoutError:
        elapsed = time.perf_counter() - started
        _kill_group(proc.pid)
        await proc.wait()
        return None, b"", b"timed out\n", elapsed


def batch_spec(command: ToolCommand, tool: str, python: str, path: str, root: str,
               items: list[tuple[Case, list[FileSpec]]]) -> dict[str, Any]:
    """What the batch runner (``batchrun.py``) of a sandbox gets: its cases, and how to run them."""
    return {
        "run": shlex.split(command.fill(command.run, Path(tool), python)), "root": root, "tool": tool,
        "env": case_env(path, command.env), "timeout": command.case_timeout, "limit": OUTPUT_LIMIT,
        "cases": [{"id": case.id, "argv": list(case.argv), "stdin": case.stdin,
                   "files": [f.model_dump() for f in files]} for case, files in items],
    }


def batch_results(stdout: bytes) -> tuple[list[CaseRun], float]:
    """The batch runner's answer: each case's run (side effects from its two snapshots), and
    the CPU seconds its cases used."""
    try:
        answer = json.loads(stdout)
        runs = [CaseRun(exit_code=r["exit_code"], stdout=r["stdout"], stderr=r["stderr"], duration=r["duration"],
                        side_effects=SideEffects.between(r["before"], r["after"]), timed_out=r["exit_code"] is None)
                for r in answer["cases"]]
        return runs, float(answer["cpu"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SideError(f"the batch runner's results do not parse: {exc!r}") from None


def discard(folder: Path) -> None:
    """A side's folder gone, however deep the tool nested folders in it (``hostfs.remove_tree``:
    no recursion, no link followed); what cannot be removed stays, as rmtree's ignore_errors left it."""
    with contextlib.suppress(OSError):
        remove_tree(folder)


def copy_tool(source: Path, dest: Path) -> None:
    """``source`` copied to ``dest``, links kept as links. ``shutil.copytree`` recurses once per
    level: for a tool folder the agent nested a thousand deep (RecursionError), ``cp -a`` does
    the copy, so the tool is judged as it would be in a container, whose copy is a tar."""
    try:
        shutil.copytree(source, dest, symlinks=True)
    except RecursionError:
        discard(dest)
        subprocess.run(["cp", "-a", "--", str(source), str(dest)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)


class LocalExecutor(CaseExecutor):
    """Runs a side on this machine under ``root``: the installed tool in ``root/tool``, each case
    in ``root/cases/N`` (its workspace, HOME and TMPDIR), removed when the case ends."""

    def __init__(self, root: Path, command: ToolCommand):
        self.root = root
        self.command = command
        self.tool = root / "tool"
        self._numbers = count()

    def _env(self, home: Path, tmp: Path) -> dict[str, str]:
        return {**case_env(os.environ.get("PATH", "/usr/bin:/bin"), self.command.env), "HOME": str(home),
                "TMPDIR": str(tmp)}

    async def build(self, source: Path) -> BuildResult:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.tool.exists():
            await asyncio.to_thread(discard, self.tool)
        if not source.is_dir():
            return BuildResult(ok=False, output=f"no tool folder: {source.name or source}")
        await asyncio.to_thread(copy_tool, source, self.tool)
        if not self.command.install:
            return BuildResult(ok=True)
        home = self.root / "build-home"
        home.mkdir(exist_ok=True)
        script = self.command.fill(self.command.install, self.tool)
        code, out, err, took = await run_process([script], cwd=self.tool, env=self._env(home, home),
                                                 stdin=None, timeout=self.command.build_timeout, shell=True)
        text = (out + err).decode("utf-8", "replace")
        return BuildResult(ok=code == 0, exit_code=code, output=text if code is not None else "install timed out",
                           duration=took)

    async def run(self, case: Case, files: list[FileSpec]) -> CaseRun:
        base = self.root / "cases" / str(next(self._numbers))
        work, home, tmp = base / "work", base / "home", base / "tmp"
        for folder in (work, home, tmp):
            folder.mkdir(parents=True)
        try:
            await asyncio.to_thread(place_files, work, files)
            before = await asyncio.to_thread(snapshot, work)
            argv = shlex.split(self.command.fill(self.command.run, self.tool)) + list(case.argv)
            stdin = case.stdin.encode() if case.stdin is not None else None
            code, out, err, took = await run_process(argv, cwd=work, env=self._env(home, tmp), stdin=stdin,
                                                     timeout=self.command.case_timeout)
            after = await asyncio.to_thread(snapshot, work)
        finally:
            await asyncio.to_thread(discard, base)
        return CaseRun(exit_code=code, stdout=self._neutral(out, work), stderr=self._neutral(err, work),
                       duration=took, side_effects=SideEffects.between(before, after), timed_out=code is None)

    def _neutral(self, data: bytes, work: Path) -> str:
        """Decode, and name the per-case folders by role: their absolute paths differ between sides."""
        text = data.decode("utf-8", "replace")
        return text.replace(str(work), "$WORKSPACE").replace(str(self.tool), "$TOOL")

    async def close(self) -> None:
        await asyncio.to_thread(discard, self.root)

    @classmethod
    async def for_session(cls, session: Any) -> type[LocalExecutor]:
        """The sides of a trial judged on this machine (a local trial, or ``run_on = "runner"``)."""
        return cls

