"""Harbor's contract in a container: how a Harbor task's agent runs.

Harbor runs the agent in the task's own image as its author left it: in the image's
``WORKDIR`` (or ``[environment] workdir``), with the image's ``ENV``, as root, on the
container's writable filesystem, within ``[environment]`` ``cpus``, ``memory_mb`` and
``storage_mb``. Our own tasks run on a read-only root as a non-root user instead
(``containers.py``); the trial's files of ours (HOME, tmp, scratch, tools) stay under
``/agentmeter`` either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import procs
from ..sandboxes.common import SYSTEM_PATH
from ..sandboxes.docker.containers import ISOLATED_NETWORK, ContainerShape, DockerSettings
from ..sandboxes.docker.limits import granted, sized_rootfs

if TYPE_CHECKING:
    from ..sandboxes.docker.engine import Engine
    from ..suites.suite import Task


@dataclass(frozen=True)
class ImageContract:
    """What a task's image says about how its agent runs."""

    workdir: str
    env: dict[str, str]


def image_contract(client: Any, image: str, task: Task) -> ImageContract:
    """Blocking: the image's WORKDIR and ENV (``task.toml`` ``[environment] workdir`` wins)."""
    config = client.api.inspect_image(image).get("Config") or {}
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    return ImageContract(task.spec.environment.workdir or config.get("WorkingDir") or "/", env)


def harbor_home(contract: ImageContract, uid: int) -> str | None:
    """A root agent's HOME as Harbor's has it: the image's ``ENV HOME``, else root's ``/root``
    (the CLIs' configuration and sessions then live in the container, and die with it). A
    non-root agent keeps the trial's own HOME under /agentmeter (None)."""
    return (contract.env.get("HOME") or "/root") if uid == 0 else None


@dataclass(frozen=True)
class EngineLimits:
    cpus: int
    storage: bool  # per-container size limits: only overlay2 on xfs (with pquota) has them
    driver: str = "?"  # the storage driver and its backing filesystem, for the trial's note


def engine_limits(client: Any) -> EngineLimits:
    info = client.info()
    status = dict(info.get("DriverStatus") or [])
    backing = status.get("Backing Filesystem") or "?"
    return EngineLimits(int(info.get("NCPU") or 1), sized_rootfs(info), f"{info.get('Driver') or '?'} on {backing}")


def unenforced(task: Task, limits: EngineLimits) -> list[str]:
    """Notes for the trial about the task's limits this engine cannot apply (never silent)."""
    storage = task.spec.environment.storage_mb
    if storage and not limits.storage:
        note = (f"[environment] storage_mb = {storage} is not enforced: the engine's storage driver "
                f"({limits.driver}) has no per-container size limit (only overlay2 on xfs with pquota has)")
        return [note]
    return []


def open_network(task: Task, network: str, where: str) -> list[str]:
    """A note when ``allow_internet = false`` cannot be applied ``where`` the trial runs and it
    keeps the suite's ``network`` (never silent): a remote docker engine or swarm manager."""
    if task.spec.environment.allow_internet or network in ("isolated", "walled", "none"):
        return []
    return [f"[environment] allow_internet = false is not enforced {where}: the trial is on the \"{network}\" network"]


def container_shape(config: DockerSettings, task: Task, contract: ImageContract, limits: EngineLimits,
                    local: bool) -> ContainerShape:
    """The task's limits over the suite's; CPUs capped at the engine's (Docker refuses more).
    ``allow_internet = false`` on a suite network with a route out (``bridge``, ``host``, a
    named one) puts the task on the isolated network: the model relay is all it reaches (local
    engines: a remote one reaches us only through its host network's tunnel)."""
    env = task.spec.environment
    cpus = min(env.cpus or config.cpus or limits.cpus, limits.cpus)
    closed = not env.allow_internet and local and config.network not in ("isolated", "none")
    return ContainerShape(read_only=False, working_dir=contract.workdir, cpus=cpus,
                          memory=f"{env.memory_mb}m" if env.memory_mb else config.memory,
                          storage=f"{env.storage_mb}m" if env.storage_mb and limits.storage else None,
                          network=ISOLATED_NETWORK if closed else None, capabilities=granted(task))


def agent_env(contract: ImageContract, extra: dict[str, str], *, home: str, cwd: str, token: str) -> dict[str, str]:
    """The image's environment, the adapter's on top; HOME is the trial's own (the CLIs keep
    their configuration and sessions there), and the trial token is always ours."""
    env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "TERM": "dumb", **contract.env, **extra}
    env.update(HOME=home, PWD=cwd)
    env[procs.TOKEN_VAR] = token
    return env


def run_as(config: Any) -> str:
    """Root, as Harbor runs agents, unless the suite names a user in ``[sandbox] user`` (docker
    or swarm settings)."""
    if "user" in config.model_fields_set:
        return "0:0" if config.user == "root" else config.user
    return "0:0"


class ContractCache:
    """Per docker (or swarm) sandbox: each image's contract and each engine's limits, asked once."""

    def __init__(self, config: Any):
        self.config = config
        self.contracts: dict[tuple[str, str, str], ImageContract] = {}
        self.limits: dict[str, EngineLimits] = {}

    async def contract(self, engine: Engine, image: str, task: Task) -> tuple[ImageContract, EngineLimits]:
        """A Harbor task's image contract and its engine's limits (asked once each)."""
        key = (engine.name, image, task.spec.environment.workdir or "")
        if key not in self.contracts:
            self.contracts[key] = await engine.call(image_contract, engine.client, image, task)
        if engine.name not in self.limits:
            self.limits[engine.name] = await engine.call(engine_limits, engine.client)
        return self.contracts[key], self.limits[engine.name]

    async def shape(self, engine: Engine, image: str, task: Task) -> tuple[ContainerShape, ImageContract | None]:
        """The container a task's trials get, and for Harbor tasks what their image says."""
        if not task.contract.image_contract:
            return ContainerShape.default(self.config, granted(task)), None
        contract, limits = await self.contract(engine, image, task)
        return container_shape(self.config, task, contract, limits, engine.local), contract
