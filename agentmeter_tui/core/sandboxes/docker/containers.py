"""Docker trial containers: the docker sandbox's settings, how a trial's container is made
(mounts, limits, network, the keep-alive under Docker's init), and a pool of ready ones.

Creating and starting a container is most of a container trial's overhead (hundreds of ms);
with ``warm = N`` the sandbox keeps N started containers per engine and image ready (copy
mode), so a trial only copies its files in and starts its agent while the next container is
made in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ...paths import default_clis_root
from ..common import Settings, resolve_path
from . import engine as engines
from .images import HOST_IMAGE
from .limits import KEPT, SIZE_PATTERN, workspace_volume
from .rootfs import AGENT_UID

if TYPE_CHECKING:
    from .engine import Engine

ROOT = "/agentmeter"
CLIS_MOUNT = "/opt/agentmeter/clis"
# Inter-container traffic off and a bridge name of ours (``hostwall.py`` filters it): a new name,
# since the options of a network made by an older runner cannot be changed.
ISOLATED_NETWORK = "agentmeter-walled"
# PID 2 under docker-init: ignores INT and TERM (inherited by its sleep), so the in-container
# signal ladder reaches only the trial's processes and the container outlives it.
KEEPALIVE = ["sh", "-c", "trap '' INT TERM HUP; while :; do sleep 3600; done"]


class EngineEntry(Settings):
    url: str | None = None  # unix://, tcp://, ssh://user@host:port; None: DOCKER_HOST or the local socket
    name: str | None = None
    slots: int = Field(4, ge=1, le=512)
    key: str | None = None  # ssh:// engines: the private key (default: ~/.ssh config)
    known_hosts: str | None = None  # ssh:// engines: trusted host keys (default: ~/.ssh/known_hosts)
    labels: list[str] = []

    _paths = field_validator("key", "known_hosts")(resolve_path)

    @property
    def display(self) -> str:
        return self.name or self.url or "local"


class DockerSettings(Settings):
    engine: str | None = None
    slots: int | None = Field(None, ge=1, le=512)
    key: str | None = None
    known_hosts: str | None = None
    engines: list[EngineEntry] = []
    image: str = HOST_IMAGE
    pull: bool = False
    workspace: Literal["copy", "bind"] = "copy"
    network: str = "isolated"
    cpus: float | None = Field(2.0, gt=0)
    memory: str | None = Field("4g", pattern=r"^\d+[bkmgBKMG]?$")
    pids: int | None = Field(1024, ge=16)
    workspace_size: str = Field("2g", pattern=SIZE_PATTERN)  # /agentmeter's tmpfs (copy mode; ``limits.py``)
    workspace_files: int = Field(1_000_000, ge=100)  # its inodes
    tmp_size: str = Field("256m", pattern=SIZE_PATTERN)  # /tmp's tmpfs (read-only roots)
    user: str = Field(f"{AGENT_UID}:{AGENT_UID}", pattern=r"^(root|\d+(:\d+)?)$")
    read_only: bool = True
    python: str = "python3"
    clis: Literal["mount", "image"] = "mount"
    clis_root: str = CLIS_MOUNT
    probe_interval: float = Field(10.0, gt=0)
    warm: int = Field(1, ge=0, le=16)  # started containers kept ready per engine and image (copy mode)

    _paths = field_validator("key", "known_hosts")(resolve_path)

    @model_validator(mode="after")
    def _coherent(self, info: ValidationInfo) -> DockerSettings:
        if self.engines and (self.engine or self.slots):
            raise ValueError("give either `engine` (and `slots`) or a list of `engines`, not both")
        remote = [e.display for e in self.entries() if not engines.is_local_url(e.url)]
        if remote and self.workspace == "bind":
            raise ValueError(f"workspace = \"bind\" needs a local engine; {remote[0]} is remote (use \"copy\")")
        if remote and self.clis == "mount":
            raise ValueError(f"clis = \"mount\" needs a local engine; {remote[0]} is remote: put the CLIs in "
                             f"the image (clis = \"image\", clis_root = where they are)")
        return self

    def entries(self) -> list[EngineEntry]:
        if self.engines:
            return self.engines
        return [EngineEntry(url=self.engine, slots=self.slots or 4, key=self.key, known_hosts=self.known_hosts)]

    @property
    def uid(self) -> int:
        return 0 if self.user == "root" else int(self.user.split(":")[0])


@dataclass(frozen=True)
class ContainerShape:
    """What differs between the containers of one sandbox: ours (read-only root, the workspace
    under /agentmeter) or a Harbor task's (writable root, its WORKDIR, its own limits)."""

    read_only: bool
    working_dir: str
    cpus: float | None
    memory: str | None
    storage: str | None = None  # a size limit of the writable layer, where the engine allows one
    network: str | None = None  # None: the suite's; a Harbor task without internet may narrow it
    capabilities: tuple[str, ...] = KEPT  # all others dropped (``limits.py``)

    @classmethod
    def default(cls, config: DockerSettings, capabilities: tuple[str, ...] = KEPT) -> ContainerShape:
        return cls(config.read_only, f"{ROOT}/workspace", config.cpus, config.memory, capabilities=capabilities)


class ContainerFactory:
    """Makes trial containers for one docker sandbox, keeping ``warm`` started ones ready."""

    def __init__(self, config: DockerSettings, suite_id: str, network: str):
        self.config, self.suite_id, self.network = config, suite_id, network
        self.pool: dict[tuple[str, str, ContainerShape], list[asyncio.Future[str]]] = {}

    def _create(self, engine: Engine, image: str, name: str | None, labels: dict[str, str],
                bind_root: str | None, start: bool, shape: ContainerShape) -> str:
        """Blocking. The container's own user is root: Docker gives an exec the capabilities of
        the container's user, and the in-container kill ladder (and the verifier) need root's;
        the agent's exec runs as the non-root user, with no capabilities at all. Root itself
        keeps only what it needs on its own files and processes (``limits.py``)."""
        from docker.types import Mount

        config, api = self.config, engine.client.api
        mounts = [Mount(ROOT, bind_root, type="bind") if bind_root else
                  workspace_volume(ROOT, config.workspace_size, config.workspace_files, labels)]
        if config.clis == "mount" and default_clis_root().is_dir():
            mounts.append(Mount(config.clis_root, str(default_clis_root()), type="bind", read_only=True))
        host_config = api.create_host_config(
            init=True, read_only=shape.read_only, mounts=mounts, network_mode=shape.network or self.network,
            nano_cpus=int(shape.cpus * 1e9) if shape.cpus else None, mem_limit=shape.memory,
            pids_limit=config.pids, security_opt=["no-new-privileges"], cap_drop=["ALL"],
            cap_add=list(shape.capabilities), storage_opt={"size": shape.storage} if shape.storage else None,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={config.tmp_size},mode=1777"} if shape.read_only else None)
        container = api.create_container(image, command=KEEPALIVE, name=name, labels=labels, user="0:0",
                                         working_dir=shape.working_dir, host_config=host_config)["Id"]
        if start:
            api.start(container)
        return container

    async def take(self, engine: Engine, image: str, name: str, labels: dict[str, str],
                   bind_root: str | None = None, shape: ContainerShape | None = None) -> tuple[str, bool]:
        """A container for one trial and whether it is started already (a warm one)."""
        shape = shape or ContainerShape.default(self.config)
        if bind_root is None and self.config.warm:
            queue = self.pool.setdefault((engine.name, image, shape), [])
            ready = queue.pop(0) if queue else None
            self.prewarm(engine, image, shape)
            if ready is not None:
                with contextlib.suppress(Exception):  # a failed warm one: make a fresh one below
                    container = await ready
                    await engine.call(engine.client.api.rename, container, name)
                    return container, True
        return await engine.call(self._create, engine, image, name, labels, bind_root, False, shape), False

    def prewarm(self, engine: Engine, image: str, shape: ContainerShape | None = None) -> None:
        """Start making containers until ``warm`` are ready or on their way (copy mode)."""
        if self.config.workspace != "copy":
            return
        shape = shape or ContainerShape.default(self.config)
        queue = self.pool.setdefault((engine.name, image, shape), [])
        labels = engines.trial_labels(self.suite_id, None, "warm")
        while len(queue) < self.config.warm:
            queue.append(asyncio.ensure_future(engine.call(self._create, engine, image, None, labels, None, True,
                                                           shape)))

    async def close(self, engines_by_name: dict[str, Engine]) -> None:
        for (engine_name, _, _), queue in self.pool.items():
            engine = engines_by_name[engine_name]
            for ready in queue:
                with contextlib.suppress(Exception):
                    container = await ready
                    await engine.call(engine.client.api.remove_container, container, force=True, v=True)
        self.pool.clear()


def sweep(engine: Engine, suite_id: str, swarm: bool = False) -> str | None:
    """Remove what this runner made for ``suite_id`` and still finds on ``engine`` (blocking):
    a trial's container whose removal failed while the engine was gone (a restarted dockerd
    keeps its stopped containers) and the volumes of such containers; on a swarm manager its
    services and configs first (a removed service's containers go with it). Returns what failed."""
    api = engine.client.api
    selector = {"label": [f"{engines.RUNNER}={engines.runner_label()}", f"{engines.SUITE}={suite_id}"]}
    try:
        if swarm:
            for service in api.services(filters=selector):
                api.remove_service(service["ID"])
            for config in api.configs(filters=selector):
                api.remove_config(config["ID"])
        for container in api.containers(all=True, filters=selector):
            api.remove_container(container["Id"], force=True, v=True)
        for volume in api.volumes(filters=selector).get("Volumes") or []:
            api.remove_volume(volume["Name"], force=True)
    except engines.engine_errors() as exc:
        return f"docker engine {engine.name}: leftovers of suite {suite_id} not removed: {exc}"
    return None
