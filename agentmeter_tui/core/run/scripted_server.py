"""The scripted model server of a run, watched.

The runner starts the server (a child process) before its first trial. Should it die mid-run
(a crash, the OOM killer, someone's ``kill``), the trials that were talking to it cannot go
on: their sessions lived in it. Our side failed, not the agent (SPEC: infra-invalid, may be
retried), so those trials are stopped and end ``infra-invalid`` with the reason ``the
scripted model server died (exit code N)``; a new server is started at once and the
scheduler's retries run against it. If no new server starts, the run stops, saying why.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..vocab import KillReason

if TYPE_CHECKING:
    from ..scripted.client import ServerProcess


class ScriptedServer:
    def __init__(self, log: Callable[[str], None]):
        self.log = log
        self.process: ServerProcess | None = None  # set by start, before any trial reads it
        self.lost: dict[str, str] = {}  # base URL of a server that died -> why

    @property
    def base_url(self) -> str:
        assert self.process is not None, "the scripted server is not started"
        return self.process.base_url

    @property
    def control_key(self) -> str:
        """The live server's control key (a new server has a new one)."""
        assert self.process is not None, "the scripted server is not started"
        return self.process.control_key

    @property
    def pid(self) -> int | None:
        return self.process.process.pid if self.process is not None else None

    async def start(self) -> str:
        from ..scripted.client import start_server_process

        self.process = process = await asyncio.to_thread(start_server_process)
        return process.base_url

    def died(self, url: str | None) -> str | None:
        """Why the server at ``url`` is gone (None: it is the live one, or none was used)."""
        if url is None:
            return None
        if url in self.lost:
            return self.lost[url]
        if self.process is not None and url == self.process.base_url and self.process.process.poll() is not None:
            return self._reason()
        return None

    def _reason(self) -> str:
        assert self.process is not None, "the scripted server is not started"
        return f"the scripted model server died (exit code {self.process.process.poll()})"

    async def watch(self, scheduler, ctx, give_up: Callable[[str], None]) -> None:
        """Wait for the server to exit; then hold the schedule, stop the trials that used it,
        start a new one for the retries (or ``give_up`` with the reason when none starts)."""
        while True:
            assert self.process is not None, "the scripted server is not started"
            await _exited(self.process.process)
            old, reason = self.process.base_url, self._reason()
            self.lost[old] = reason
            scheduler.hold("model-server", f"{reason}: starting a new one")
            self.log(f"agentmeter: {reason}; the trials that used it end infra-invalid and are retried "
                     "against a new one")
            for trial in list(scheduler.running.values()):
                if trial.scripted_url == old:
                    trial.request_kill(KillReason("infra", reason))
            try:
                ctx.mock_url = await self.start()
            except Exception as exc:  # noqa: BLE001 - whatever stops it, the run cannot go on
                give_up(f"{reason}, and a new one did not start: {exc}")
                return
            scheduler.release("model-server")
            self.log(f"agentmeter: a new scripted model server listens on {self.base_url}")

    async def stop(self) -> None:
        if self.process is not None:
            await asyncio.to_thread(self.process.stop)


async def _exited(process) -> None:
    """Return when ``process`` (a Popen) has exited: a pidfd in the event loop, no thread."""
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # no pidfd here (or it is gone already): poll
        while process.poll() is None:
            await asyncio.sleep(0.2)
        return
    done = loop.create_future()
    loop.add_reader(fd, lambda: None if done.done() else done.set_result(None))
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    process.poll()  # reap it: its exit code is the reason's
