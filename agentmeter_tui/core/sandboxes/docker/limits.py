"""What a trial's container may hold: its capabilities and the size of its writable places.

Capabilities: every container (docker and swarm) starts with ``cap_drop = ALL`` and gets back
only :data:`KEPT`, what root needs to act on its own files and processes (the in-container
kill ladder and the verifier run as root and signal and read the agent's); a non-root agent
has none of them anyway (``no-new-privileges``). NET_RAW (raw sockets, ping), MKNOD, SETUID,
SETGID, NET_BIND_SERVICE, SYS_CHROOT, AUDIT_WRITE and the rest are gone unless a task's
``[environment] capabilities`` names them (a Harbor task whose agent must, say, change user).

Size: the docker sandbox's ``/agentmeter`` (workspace, home, tmp, scratch) is a ``tmpfs``
volume of ``workspace_size`` and ``workspace_files`` inodes (overlay2 on ext4 has no per-container quota, and a tmpfs is
charged to the container's memory limit as well); ``/tmp`` is a tmpfs of ``tmp_size``. A
write past the limit fails with ENOSPC inside the container and the engine's disk is not
touched.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..hostfs import blocks_under

KEPT = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL")  # sorted, as granted() gives them
SIZE_PATTERN = r"^\d+[kmgKMG]?$"


def granted(task: Any) -> tuple[str, ...]:
    """The capabilities a trial's container gets: :data:`KEPT` and what its task asks for."""
    asked = task.spec.environment.capabilities if task is not None else []
    return tuple(sorted(set(KEPT) | set(asked)))


def workspace_volume(target: str, size: str, files: int, labels: dict[str, str]) -> Any:
    """The trial's ``/agentmeter``: a local volume on a tmpfs of ``size`` and ``files`` inodes
    (mode 0755, root's)."""
    from docker.types import DriverConfig, Mount

    return Mount(target, None, type="volume", labels=labels,
                 driver_config=DriverConfig("local", {"type": "tmpfs", "device": "tmpfs",
                                                      "o": f"size={size},nr_inodes={files},mode=0755"}))


def sized_rootfs(info: dict[str, Any] | None) -> bool:
    """Whether the engine limits a container's root filesystem itself (``--storage-opt size``:
    overlay2 on xfs with pquota only)."""
    status = dict((info or {}).get("DriverStatus") or [])
    return (info or {}).get("Driver") == "overlay2" and status.get("Backing Filesystem") == "xfs"


def service_limits(resources: Any, pids: int | None) -> Any:
    """A swarm service's ``Resources`` with a pids limit (``Limits.Pids``, API 1.41; the SDK
    has no argument for it, and ``Resources`` is the dict the engine is sent)."""
    if pids:
        resources.setdefault("Limits", {})["Pids"] = pids
    return resources


def confined(task: Any) -> dict[str, Any]:
    """A swarm service's capability arguments, as the docker sandbox's containers have them."""
    return {"cap_drop": ["ALL"], "cap_add": list(granted(task))}


class DiskWatch:
    """Measures a writable place (``measure``: bytes written, blocking, None when it cannot
    tell) every ``interval`` seconds from :meth:`start` until :meth:`stop`; :attr:`breach`
    is set to the reason once it holds more than ``limit`` bytes."""

    def __init__(self, what: str, measure: Callable[[], int | None], limit: int, interval: float = 1.0):
        self.what, self.measure, self.limit, self.interval = what, measure, limit, interval
        self.breach: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task | None = None

    def start(self) -> asyncio.Future[str]:
        if self.task is None:
            self.task = asyncio.ensure_future(self._watch())
        return self.breach

    async def _watch(self) -> None:
        while not self.breach.done():
            size = await asyncio.to_thread(self.measure)
            if size is not None and size > self.limit:
                self.breach.set_result(f"{self.what}: {size >> 20} MB written, the limit is {self.limit >> 20} MB")
                return
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def written_rootfs(api: Any, container: str) -> Callable[[], int | None]:
    """What a container wrote to its root filesystem (its upper layer), as the engine counts it."""
    def measure() -> int | None:
        try:  # the SDK's inspect_container has no ``size`` argument
            answer = api._result(api._get(api._url("/containers/{0}/json", container), params={"size": 1}), True)
            return int(answer.get("SizeRw") or 0)
        except Exception:  # noqa: BLE001 - gone or not answering: the trial's own watchers say so
            return None
    return measure


def written_folder(root: str) -> Callable[[], int | None]:
    """The blocks the files under ``root`` take (links not followed, other mounts not entered,
    any depth: :func:`hostfs.blocks_under`); None once ``root`` is gone."""
    def measure() -> int | None:
        try:
            return blocks_under(Path(root))
        except OSError:
            return None
    return measure
