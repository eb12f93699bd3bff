"""A walled trial's processes put into its cgroup by the runner, before its command runs.

bwrap is started with ``--info-fd`` and ``--block-fd``: it writes its child's pid (JSON
``child-pid``, as this pid namespace sees it) on the first right after its clone, and the
child, its mounts made, waits on the second before it forks the command. The runner moves
bwrap into the group (:meth:`..cgroups.Group.add`) the moment it is spawned, the child once it
is named (mostly born there already), then lets the child go on: the command and everything it
forks start in the group. It replaces the ``sh`` join (:meth:`..cgroups.Group.wrap`), an exec
a trial (about half a ms of CPU, benchmarks/containment.py), which the unwalled trials
(``isolation = "none"``) and ``agentmeter meter`` keep.

Never a hang, never a process outside: a bwrap that ends before it writes (a bad option, no
namespaces) closes the info pipe, and its exit and its message are the trial's as before; a
move that fails kills bwrap and its child before the block pipe is closed (its end of file
would let the child go on), and raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import select
import signal
import time

from ..cgroups import Group

#: bwrap writes once, right after its clone (a few ms here, at a load of 5): a bound, not a wait
INFO_WAIT = 10.0
#: what a join given up waits for the rest of bwrap's info, to kill the child it names
ABORT_WAIT = 1.0


class JoinError(RuntimeError):
    """The trial's sandbox could not be moved into its group: it was killed, nothing ran."""


class Handshake:
    """One bwrap start's two pipes: ``argv`` adds their options, ``fds`` are what the spawn
    passes (``pass_fds``), :meth:`started` and :meth:`join` do the rest. Used as a context
    manager: whatever is left open (the spawn failed) is closed on the way out."""

    def __init__(self, group: Group):
        self.group = group
        self._info_r, self._info_w = _pipe()
        self._block_r, self._block_w = _pipe()
        self._chunks: list[bytes] = []  # what bwrap wrote on the info pipe so far
        self._moved = 0  # bwrap's pid once it is in the group
        self._pid = 0  # bwrap's pid once spawned (started)
        self._joined = False  # join ran: from there it kills on every failure itself

    @property
    def fds(self) -> tuple[int, int]:
        return self._info_w, self._block_r

    def argv(self, argv: list[str]) -> list[str]:
        """bwrap's ``argv`` with the two pipes' options (they may stand anywhere before ``--``)."""
        return [argv[0], "--info-fd", str(self._info_w), "--block-fd", str(self._block_r), *argv[1:]]

    def started(self, pid: int) -> None:
        """bwrap (``pid``) into the group the moment it is spawned: its clone comes about a ms
        later, so its child is mostly born there, and a runner killed before :meth:`join` moved
        it leaves nothing outside. A failure here is :meth:`join`'s to report (it moves both)."""
        self._pid = pid
        with contextlib.suppress(OSError):
            self.group.add(pid)
            self._moved = pid

    async def join(self, pid: int) -> None:
        """bwrap (``pid``, just spawned) and its child into the group, then its command let go.
        Read on the loop, not blocking it: the info comes a few ms after the spawn (bwrap's
        start and its clone), a wait the loop's other trials should not share."""
        self._joined = True
        self._close("_info_w", "_block_r")  # ours closed: bwrap's end closing is the end of file
        child: int | None = None
        try:
            child = _child_pid(await self._info())
            if child is not None:
                self.group.add(child, *([pid] if self._moved != pid else []))
        except BaseException as exc:  # a cancel too: nothing of the trial may go on ungrouped
            self._abort(pid, child)
            if isinstance(exc, (OSError, ValueError)):  # a TimeoutError is an OSError
                why = str(exc) or f"no child pid within {INFO_WAIT:.0f} s"
                raise JoinError(f"the trial's sandbox could not join its cgroup {self.group.name} "
                                f"({why}): killed before its command ran") from exc
            raise
        if child is not None:
            with contextlib.suppress(BrokenPipeError):  # the child ended already (a bind that failed)
                os.write(self._block_w, b"1")
        # None: bwrap ended before its info, and its exit says why, as it did before the handshake
        self.close()

    async def _info(self) -> bytes:
        """What bwrap wrote on the info pipe, up to its end (bwrap and its child close it)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bytes] = loop.create_future()
        fd = self._info_r

        def read() -> None:
            data = self._read()
            if data is not None and not data and not done.done():
                done.set_result(b"".join(self._chunks))

        os.set_blocking(fd, False)
        loop.add_reader(fd, read)

        def late() -> None:
            if not done.done():
                done.set_exception(TimeoutError())

        timer = loop.call_later(INFO_WAIT, late)
        try:
            return await done
        finally:
            timer.cancel()
            loop.remove_reader(fd)

    def _read(self) -> bytes | None:
        """One read of the info pipe (kept), b"" at its end, None when nothing is there yet."""
        try:
            data = os.read(self._info_r, 4096)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data = b""
        self._chunks.append(data)
        return data

    def _abort(self, pid: int, child: int | None) -> None:
        """bwrap killed, then its child: known, or named by bwrap's info (read whole first).
        bwrap lets its child past its clone only after it wrote the info whole, so a child that
        could go on to the block pipe is named there; one that is not waits for bwrap's word
        forever, and the trial's sweep ends it (it carries the trial's token)."""
        if child is None:  # read before bwrap is killed: killed mid-write, it never finishes the info
            child = self._named_child(ABORT_WAIT)
        if pid > 0:  # 0: never spawned, or not known (the spawn was cut short)
            _kill(pid)
        if child is not None:
            _kill(child)

    def _named_child(self, wait: float) -> int | None:
        """The child bwrap's info names: in the pipe already, or within ``wait`` seconds (it
        writes right after its clone, in more than one write); None at the pipe's end without
        one (bwrap ended first), or once ``wait`` is over. The child waits on the block pipe
        meanwhile, which stays ours."""
        deadline = time.monotonic() + wait
        while True:
            while data := self._read():
                pass
            with contextlib.suppress(ValueError):
                if (child := _child_pid(b"".join(self._chunks))) is not None:
                    return child
            left = deadline - time.monotonic()
            if data == b"" or left <= 0:
                return None
            select.select([self._info_r], [], [], left)

    def _close(self, *names: str) -> None:
        for name in names:
            fd = getattr(self, name)
            if fd != -1:
                setattr(self, name, -1)
                os.close(fd)

    def close(self) -> None:
        """Every pipe end still open. The block pipe's end goes last: should a child be waiting
        on it (the spawn raised after bwrap started), it is gone with its killed parent first."""
        self._close("_info_r", "_info_w", "_block_r", "_block_w")

    def __enter__(self) -> Handshake:
        return self

    def __exit__(self, *_exc: object) -> None:
        if not self._joined:  # given up between spawn and join (a cancel): kill what bwrap named
            self._close("_info_w")
            if self._info_r != -1:
                os.set_blocking(self._info_r, False)  # what is in the pipe, never a wait
            self._abort(self._pid, None)
        self.close()


def _pipe() -> tuple[int, int]:
    """A pipe whose ends are above stdio: the spawn puts its own stdin, stdout and stderr on 0 to
    2 before it keeps ``pass_fds`` (a runner started with stdin closed would get 0 here)."""
    ends = []
    for fd in os.pipe2(os.O_CLOEXEC):
        if fd <= 2:
            fd, low = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3), fd
            os.close(low)
        ends.append(fd)
    return ends[0], ends[1]


def _child_pid(info: bytes) -> int | None:
    """bwrap's ``child-pid``; None when it wrote nothing (it ended first). ValueError for
    anything else: a child may be there, unaccounted for."""
    if not info:
        return None
    try:
        pid = json.loads(info).get("child-pid")
    except (ValueError, AttributeError):
        pid = None
    if not isinstance(pid, int) or pid <= 0:
        raise ValueError(f"its info names no child pid: {info[:200]!r}")
    return pid


def _kill(*pids: int) -> None:
    """SIGKILL: once sent, none of them runs another instruction of its own."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
