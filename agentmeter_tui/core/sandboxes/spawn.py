"""A local child process read on the run's loop: its two output pipes and its exit, each one
file descriptor the loop watches (``add_reader``; the exit through a pidfd).

asyncio's subprocess transport costs the loop about twice as much per process: a task to
connect the pipes, a transport per pipe, a child watcher, and a chain of callbacks when it
ends. For a trivial trial that was a third of the runner's own time (benchmarks/overhead.py).
The output is read in large chunks and handed over as whole lines; while ``on_output``
returns a future (the store writer is behind), that pipe is not read until it is done, so
the agent blocks on its full pipe and nothing is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import subprocess
from collections.abc import Callable

from ..lines import LineSplitter
from .base import OutputCallback

READ_SIZE = 256 * 1024  # what asyncio's pipe transport reads at once


class Spawned:
    """``argv`` started in a session of its own with a closed stdin (``Popen``, which uses
    vfork: no preexec hook) and ``pass_fds`` open, ``joined`` told its pid at once (:mod:`.joining`);
    ``exited`` is set when it ends, ``pipes_closed`` when both pipes reached their end (a
    background job it left may hold them open longer)."""

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: str, on_output: OutputCallback,
                 pass_fds: tuple[int, ...] = (), joined: Callable[[int], None] | None = None):
        self.loop = asyncio.get_running_loop()
        self.on_output = on_output
        self.returncode: int | None = None
        self.exited = asyncio.Event()
        self.pipes_closed = self.loop.create_future()
        self.holding = True  # until it exits: then the rest of its pipes is read whatever the writer's backlog
        self._held: set[int] = set()
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w, cwd=cwd, env=env,
                                          start_new_session=True, pass_fds=pass_fds)
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        self.pid = self._proc.pid
        if joined is not None:
            joined(self.pid)  # before anything else: it races the child's first steps
        self._pipes = {out_r: ("stdout", LineSplitter()), err_r: ("stderr", LineSplitter())}
        for fd in self._pipes:
            os.set_blocking(fd, False)
            self.loop.add_reader(fd, self._read, fd)
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd (an old kernel): a thread waits instead
            self.loop.run_in_executor(None, self._wait_blocking)
        else:
            self.loop.add_reader(self._pidfd, self._reap)

    # -- output --------------------------------------------------------------------------------

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        stream, splitter = self._pipes[fd]
        if not data:
            self._close_pipe(fd)
            return
        lines = splitter.feed(data)
        if lines:
            hold = self.on_output(stream, lines)
            if hold is not None and self.holding and fd not in self._held:
                self.loop.remove_reader(fd)
                self._held.add(fd)
                hold.add_done_callback(functools.partial(self._resume_when_done, fd))

    def _resume_when_done(self, fd: int, _done: object) -> None:
        self._resume(fd)

    def _resume(self, fd: int) -> None:
        if fd in self._held:
            self._held.discard(fd)
            if fd in self._pipes:
                self.loop.add_reader(fd, self._read, fd)

    def release(self) -> None:
        """Read the rest of the pipes whatever the writer's backlog (at most a pipe's buffer, plus
        what a leftover background job prints before the sweep)."""
        self.holding = False
        for fd in list(self._held):
            self._resume(fd)

    def _close_pipe(self, fd: int) -> None:
        stream, splitter = self._pipes.pop(fd)
        self._held.discard(fd)
        self.loop.remove_reader(fd)
        os.close(fd)
        if rest := splitter.flush():
            self.on_output(stream, rest)
        if not self._pipes and not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    # -- exit ----------------------------------------------------------------------------------

    def _reap(self) -> None:
        assert self._pidfd is not None  # _reap is the pidfd's reader
        self.loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = None
        try:
            _, status = os.waitpid(self.pid, 0)  # the pidfd is readable: it has exited, this does not block
        except ChildProcessError:  # reaped by someone else: its status is lost
            status = -1
        self._exited(status)

    def _wait_blocking(self) -> None:
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = -1
        self.loop.call_soon_threadsafe(self._exited, status)

    def _exited(self, status: int) -> None:
        self.returncode = os.waitstatus_to_exitcode(status) if status != -1 else 255
        self._proc.returncode = self.returncode  # Popen must not wait for it again when collected
        self.exited.set()

    def close(self) -> None:
        """Stop watching whatever is still open (the process has exited)."""
        for fd in list(self._pipes):
            self.loop.remove_reader(fd)
            os.close(fd)
        self._pipes.clear()
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                self.loop.remove_reader(self._pidfd)
                os.close(self._pidfd)
            self._pidfd = None
