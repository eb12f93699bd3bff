"""A local agent's process as the run's loop watches it (core/sandboxes/spawn.py): every line in
order, the pipe not read while the store writer holds output back (the agent waits on its full
pipe), the exit seen apart from the pipes (a leftover may hold them), a signal's exit code."""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import struct
import sys
import termios

from agentmeter_tui.core.sandboxes.spawn import Spawned
from tests.waiting import eventually

LINES = 50_000  # ~600 KB: many times a pipe's buffer
PRINTER = f"import sys\nsys.stdout.write(''.join('line %d\\n' % n for n in range({LINES})))\n"
_F_GETPIPE_SZ = 1032


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _unread(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


async def test_a_held_pipe_is_not_read_and_nothing_is_lost(tmp_path):
    hold = asyncio.get_running_loop().create_future()
    batches: list[list[bytes]] = []

    def on_output(stream: str, lines: list[bytes]) -> asyncio.Future | None:
        assert stream == "stdout"
        batches.append(lines)
        return hold if len(batches) == 1 else None

    process = Spawned([sys.executable, "-c", PRINTER], env=_env(), cwd=str(tmp_path), on_output=on_output)
    try:
        stdout = next(fd for fd, (stream, _) in process._pipes.items() if stream == "stdout")
        size = fcntl.fcntl(stdout, _F_GETPIPE_SZ)
        # Held after its first batch: the pipe fills up and the agent waits on it.
        await eventually(lambda: _unread(stdout) == size, "the held pipe to fill up")
        assert len(batches) == 1 and not process.exited.is_set()
        hold.set_result(None)
        await process.exited.wait()
        await process.pipes_closed
    finally:
        process.close()
    assert process.returncode == 0
    assert [line for batch in batches for line in batch] == [b"line %d" % n for n in range(LINES)]


async def test_the_exit_is_seen_while_a_leftover_holds_the_pipes(tmp_path):
    ready = tmp_path / "leftover.pid"
    script = f'sleep 1000 & echo $! > "{ready}"; echo started'
    seen: list[bytes] = []
    process = Spawned(["/bin/sh", "-c", script], env=_env(), cwd=str(tmp_path),
                      on_output=lambda stream, lines: seen.extend(lines))
    try:
        await process.exited.wait()
        assert process.returncode == 0 and not process.pipes_closed.done()  # the sleep still holds them
        leftover = int(await eventually(lambda: ready.exists() and ready.read_text().strip(), "the leftover's pid"))
        os.kill(leftover, signal.SIGKILL)
        await process.pipes_closed
    finally:
        process.close()
    assert seen == [b"started"]


async def test_a_killed_agent_exits_with_the_signal(tmp_path):
    process = Spawned(["/bin/sh", "-c", "echo up; exec sleep 1000"], env=_env(), cwd=str(tmp_path),
                      on_output=lambda stream, lines: None)
    try:
        await eventually(lambda: os.path.exists(f"/proc/{process.pid}") and
                         open(f"/proc/{process.pid}/comm").read().strip() == "sleep", "the sleep to run")
        os.kill(process.pid, signal.SIGKILL)
        await process.exited.wait()
    finally:
        process.close()
    assert process.returncode == -signal.SIGKILL
