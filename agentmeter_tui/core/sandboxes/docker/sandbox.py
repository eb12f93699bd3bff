"""The docker sandbox: one container per trial, on one or more Docker engines.

A trial's container runs its task's image (``images.py``) with a keep-alive under Docker's
init, a read-only root filesystem, CPU, memory and pids limits, and one writable place,
``/agentmeter`` (workspace, home, tmp, scratch, tools), that is either an anonymous volume
the workspace is copied into (``workspace = "copy"``) or a folder of this machine
bind-mounted (``"bind"``, local engines only). The agent runs as a non-root user through
an exec whose output streams back line by line. Kill: SIGINT then SIGTERM to every process
of the container from inside, then a container kill (SIGKILL, never a stop timeout); the
container and its volume are removed at cleanup. Everything is labelled (``engine.py``) so
``agentmeter doctor --clean`` finds what a crashed runner left.

Network (``network``): ``isolated`` (default: an internal network whose only reachable
address is this machine's relay to the model server or metering proxy), ``bridge``,
``host``, ``none`` or the name of an existing network.

A task that follows Harbor's contract runs as Harbor runs it instead (``core/harbor/contract.py``): in its
image's WORKDIR, with the image's ENV, as root, on a writable root filesystem.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ...harbor.contract import ContractCache, open_network, run_as, unenforced
from ...install.clisbundle import Manifest, load_manifest
from ...paths import default_clis_root, shared_tmp
from ...run.placement import Host, Placement
from ..base import TrialSlot
from ..common import HostWatch, load_settings, shipped_files
from ..hostcheck import HostCheck, check_docker_engine
from ..local import LocalSandbox
from ..relay import RelayPool, is_loopback
from . import engine as engines
from .containers import ISOLATED_NETWORK, ROOT, ContainerFactory, DockerSettings, sweep
from .hostwall import HostWall, isolated_network
from .images import ImageError, ImageResolver
from .leftovers import EngineSandbox, EngineTarget
from .session import ContainerSession, check_bundle, chown_tree
from .users import with_agent_user

if TYPE_CHECKING:
    from ...suites.suite import Task

class DockerSandbox(EngineSandbox):
    name = "docker"
    Settings = DockerSettings
    keeps_for_regrade = True
    cleans_this_machine = True  # this machine's engine, where swarm services may be left too

    def __init__(self, suite: Any, settings: dict[str, Any] | None = None):
        super().__init__(suite, settings)
        self.config = load_settings(DockerSettings, suite, self.settings)
        self.entries = {e.display: e for e in self.config.entries()}
        self.placement = Placement([Host(e.display, e.slots, frozenset(e.labels)) for e in self.entries.values()])
        self.engines: dict[str, engines.Engine] = {}
        self.images = ImageResolver(self.config.image, pull=self.config.pull,
                                    on_progress=lambda text: self.on_progress(text))
        self.images.derive = self._with_agent_user
        self.relays = RelayPool()
        self.wall = HostWall()  # this machine's addresses, closed to the isolated network but the relays
        self.gateways: dict[tuple[str, str], str | None] = {}  # (engine, network) -> where containers reach us
        self.ssh_links: dict[str, Any] = {}  # remote engine -> the SSH connection carrying its reverse tunnels
        self.tunnels: dict[tuple[str, tuple[str, int]], Any] = {}  # (engine, target) -> its tunnel's listener
        self.watch = HostWatch(self.placement, self._probe, self.config.probe_interval)
        self._connect_lock = asyncio.Lock()
        self._local_files: LocalSandbox | None = None
        self._bundle: Manifest | None = None
        self._bundle_read = False
        self.containers = ContainerFactory(self.config, suite.id, self.network_mode())
        self.contracts = ContractCache(self.config)
        self.problems: list[str] = []  # tasks whose own image failed: their trials fail, the run goes on

    def capacity(self) -> int:
        return self.placement.total_slots()

    def engine_targets(self) -> list[EngineTarget]:
        return [(e.url, e.key, e.known_hosts) for e in self.config.entries()]

    async def check_hosts(self) -> list[HostCheck]:
        checks: list[HostCheck] = []
        for entry in self.config.entries():
            checks.extend(await asyncio.to_thread(check_docker_engine, entry.url, self.suite, key=entry.key,
                                                  known_hosts=entry.known_hosts, clis=self.config.clis))
        return checks

    def _with_agent_user(self, client: Any, image: str, task: Task) -> str:
        """The image a task's trials run: with a passwd entry for the agent's uid (``users``)."""
        user = run_as(self.config) if task.contract.agent_as_root else self.config.user
        uid, _, gid = ("0:0" if user == "root" else user).partition(":")
        return with_agent_user(client, image, int(uid), int(gid or uid), f"{ROOT}/home")

    async def engine(self, name: str) -> engines.Engine:
        async with self._connect_lock:
            if name not in self.engines:
                entry = self.entries[name]
                client = await asyncio.to_thread(engines.connect, entry.url, key=entry.key,
                                                 known_hosts=entry.known_hosts)
                self.engines[name] = engines.Engine(name, entry.url, client, engines.is_local_url(entry.url))
                await self.gateway(self.engines[name], self.config.network)
            return self.engines[name]

    async def gateway(self, engine: engines.Engine, network: str) -> str | None:
        """The address containers on ``network`` reach this machine at (the network made if ours)."""
        key = (engine.name, self.network_mode(network))
        if key not in self.gateways:
            self.gateways[key] = await engine.call(self._prepare_network, engine, network)
        return self.gateways[key]

    async def _probe(self, name: str) -> None:
        engine = self.engines.get(name)
        if engine is not None:
            await engine.call(engine.client.ping)
        else:
            await self.engine(name)

    async def preflight(self) -> None:
        """Connect every engine and resolve (build or load) every task's image now, so a missing
        image stops the run before any trial starts, with the reason."""
        if self.network_mode() == "none":
            raise engines.EngineError('network = "none" leaves the agents no way to reach their models; '
                                      'use "isolated" (only the model server or metering proxy is reachable)')
        if self.config.clis == "mount":
            check_bundle(self.suite, self.config.clis_root, self.bundle())
        self.local_files()  # removes the host folders of this machine's runners that are gone
        for name in self.entries:
            engine = await self.engine(name)
            # What a runner killed with kill -9 left of this suite (the trial in flight, warm ones).
            report = await engine.call(engines.clean_leftovers, None, client=engine.client, suite_id=self.suite.id)
            if report.total:
                print(f"agentmeter: docker engine {engine.name}: removed {report.total} object(s) of suite "
                      f"{self.suite.id} left by runners that are gone", file=sys.stderr, flush=True)
            shapes = set()
            for number, task in enumerate(self.suite.tasks, 1):
                self.on_progress(f"task images on {name}: {number}/{len(self.suite.tasks)} ({task.id})")
                try:
                    image = await engine.call(self.images.resolve, engine.client, name, self.suite.id, task)
                except ImageError as exc:
                    if exc.task is None:  # the suite's own image: nothing can run
                        raise
                    self.problems.append(str(exc))
                    continue
                shape = (await self.contracts.shape(engine, image, task))[0]
                if shape.network:
                    await self.gateway(engine, "isolated")
                shapes.add((image, shape))
            if len(shapes) <= 4:  # a suite of many images warms each one on its first use instead
                for image, shape in shapes:
                    self.containers.prewarm(engine, image, shape)


    def network_mode(self, network: str | None = None) -> str:
        mode = network or self.config.network
        return ISOLATED_NETWORK if mode == "isolated" else mode

    def _prepare_network(self, engine: engines.Engine, network: str) -> str | None:
        """Create the isolated network if needed; return the address a container reaches us at."""
        client = engine.client
        mode = self.network_mode(network)
        if mode in ("host", "none"):
            return None
        from docker.errors import NotFound

        if mode == ISOLATED_NETWORK:
            found = isolated_network(client)
        else:
            try:
                found = client.networks.get(mode)
            except NotFound:
                raise engines.EngineError(f"docker network '{mode}' does not exist on {engine.name}") from None
        configs = (found.attrs.get("IPAM") or {}).get("Config") or []
        return next((c["Gateway"] for c in configs if c.get("Gateway")), None)

    async def translate_url(self, url: str, engine_name: str, network: str | None = None) -> str:
        """The model's base URL as a container on ``engine_name`` (and ``network``) reaches it."""
        if not is_loopback(url):
            return url
        engine = self.engines[engine_name]
        mode = self.network_mode(network)
        if mode == "none":
            raise RuntimeError("network = \"none\" leaves the agent no way to reach its model; use \"isolated\"")
        if mode == "host":
            if engine.local:
                return url
            return await self._tunnel(engine_name, url)
        gateway = self.gateways.get((engine_name, mode))
        if not engine.local or not gateway:
            raise RuntimeError(f"the model at {url} is on this machine's loopback, which containers on "
                               f"{engine_name} ({mode}) cannot reach; use network = \"host\" for remote engines")
        relayed = self.relays.translate(url, gateway)
        if mode == ISOLATED_NETWORK:
            await asyncio.to_thread(self.wall.allow, gateway, urlsplit(relayed).port or 80)
        return relayed

    async def _tunnel(self, engine_name: str, url: str) -> str:
        """Remote engine, host network: a reverse SSH tunnel from the remote loopback to ours."""
        from ..relay import replace_host, target_of
        from ..ssh.conn import SshTarget, connect

        entry = self.entries[engine_name]
        key = (engine_name, target_of(url))
        if key not in self.tunnels:
            assert entry.url is not None  # a remote engine is named by its URL
            conn = self.ssh_links.get(engine_name)
            if conn is None:
                conn = self.ssh_links[engine_name] = await connect(SshTarget.from_url(entry.url, entry.key,
                                                                                    entry.known_hosts))
            listener = await conn.forward_remote_port("127.0.0.1", 0, *target_of(url))
            self.tunnels[key] = listener
        return replace_host(url, "127.0.0.1", self.tunnels[key].get_port())

    async def open(self, task: Task, trial_id: int, token: str) -> DockerSession:
        slot = self.placement.slot_for(token)
        if slot is not None:
            host = slot.host
        elif (picked := self.placement.pick()) is not None:
            host = picked.name
        else:  # every engine is down: the trial is infra-invalid and retried, as on a lost engine
            raise ConnectionError("no docker engine is up to open a trial on")
        session = None
        try:
            engine = await self.engine(host)
            image = await engine.call(self.images.resolve, engine.client, host, self.suite.id, task)
            session = DockerSession(self, engine, token, trial_id)
            await session.create(task, image)
        except Exception as exc:
            if session is not None:
                with contextlib.suppress(*engines.engine_errors()):  # the engine may be gone: close() sweeps
                    await session.cleanup()
            if _engine_lost(exc):
                # Its slots wait for the engine to answer again; the trial is infra-invalid, retried.
                self.watch.down(host, str(exc))
                named = engines.lost(host, exc)
                if named is exc:
                    raise
                raise named from exc
            raise
        return session

    def bundle(self) -> Manifest | None:
        """The mounted CLIs' runtime manifest, read once per run."""
        if not self._bundle_read:
            self._bundle, self._bundle_read = load_manifest(default_clis_root()), True
        return self._bundle

    def local_files(self) -> LocalSandbox:
        if self._local_files is None:
            self._local_files = LocalSandbox(self.suite, {"root": str(shared_tmp("agentmeter-docker")),
                                                        "processes": False})
        return self._local_files

    async def close(self) -> None:
        await self.watch.close()
        await self.containers.close(self.engines)
        for engine in self.engines.values():  # what an engine that was gone for a while kept
            if problem := await engine.call(sweep, engine, self.suite.id):
                print(f"agentmeter: {problem}", file=sys.stderr, flush=True)
        await self.relays.close()
        await asyncio.to_thread(self.wall.close)
        for conn in list(self.ssh_links.values()):  # its tunnels' listeners close with it
            conn.close()
        for engine in self.engines.values():
            engine.close()


def _engine_lost(exc: BaseException) -> bool:
    import requests

    return isinstance(exc, (ConnectionError, requests.exceptions.ConnectionError, engines.EngineError))


class DockerSession(ContainerSession):
    """A trial in a container this sandbox creates (``containers.py``); the rest is
    ``session.py``'s, shared with the swarm sandbox's Harbor trials."""

    def __init__(self, sandbox: DockerSandbox, engine: engines.Engine, token: str, trial_id: int):
        config = sandbox.config
        super().__init__(engine, token, trial_id, python=config.python, clis_root=config.clis_root, uid=config.uid,
                         slot=TrialSlot("docker", engine.name))
        self.sandbox, self.config = sandbox, config
        self.mount_clis = config.clis == "mount"
        self.run_user = "0:0" if config.uid == 0 else config.user
        self.network: str | None = None  # None: the suite's network

    def bundle(self) -> Manifest | None:
        return self.sandbox.bundle()

    def engine_lost(self, exc: BaseException) -> None:
        self.sandbox.watch.down(self.engine.name, str(exc))

    async def create(self, task: Task, image: str) -> None:
        api = self.engine.client.api
        labels = engines.trial_labels(self.sandbox.suite.id, self.trial_id, self.token)
        bind_root = None
        self.image = image
        shape, contract = await self.sandbox.contracts.shape(self.engine, image, task)
        if contract is not None:
            self.adopt(contract, run_as(self.config))
            self.notes += unenforced(task, self.sandbox.contracts.limits[self.engine.name])
            if not self.engine.local:  # its containers reach the model through an SSH tunnel on that host
                self.notes += open_network(task, self.config.network, "on a remote engine")
        if self.config.workspace == "bind":
            self.host_files = await self.sandbox.local_files().open(task, self.trial_id, self.token)
            self.host_files.owner, self.host_files.noting = self.config.uid, self.note
            await asyncio.to_thread(self._prepare_host_root, Path(self.host_files.root))
            bind_root = str(self.host_files.root)
        name = f"agentmeter-t{self.trial_id}-{self.token[:8]}"
        if shape.network:  # allow_internet = false on a suite network that has a route out
            self.network = "isolated"
            await self.sandbox.gateway(self.engine, self.network)
        if self.sandbox.network_mode(self.network) == ISOLATED_NETWORK and (note := self.sandbox.wall.note()):
            self.notes.append(note)
        self.container, started = await self.sandbox.containers.take(self.engine, image, name, labels, bind_root,
                                                                     shape)
        if not started:  # before its files go in: a tmpfs volume is mounted only while it runs
            await self.engine.call(api.start, self.container)
        if bind_root is not None:
            await self.seed_contract(task)
        elif self.contract is not None:  # Harbor's writable root: everything in one archive
            await self.engine.call(api.put_archive, self.container, "/", self.root_tar(task))
        else:  # a read-only root takes archives only into its volumes
            await self.engine.call(api.put_archive, self.container, ROOT, self.seed_tar(task))

    def _prepare_host_root(self, root: Path) -> None:
        for rel, data in shipped_files().items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        (root / "tmp").chmod(0o1777)
        chown_tree(root, self.config.uid)

    async def translate_url(self, url: str) -> str:
        return await self.sandbox.translate_url(url, self.engine.name, self.network)

    async def cleanup(self, keep: bool = False) -> None:
        if keep:
            await self.keep_workspace()
        await self.remove_container()
        if self.host_files is not None:
            await self.host_files.cleanup(keep)


__all__ = ["DockerSandbox", "DockerSession", "DockerSettings"]
