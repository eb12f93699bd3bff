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

A task that follows Harbor's contract runs as Harbor runs it instead (``harbor.py``): in its
image's WORKDIR, with the image's ENV, as root, on a writable root filesystem.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...clisbundle import Manifest, container_argv, load_manifest
from ...harnesses import ADAPTERS
from ...paths import default_clis_root
from ...run.placement import Host, Placement
from ..archive import TarWriter, extract
from ..base import ExecResult, KillPolicy, LaunchSpec, OutputCallback, Sandbox, SandboxSession, TrialSlot
from ..common import HostWatch, load_settings, map_argv, shipped_files, trial_env
from ..local import LocalSandbox, LocalSession, read_globs
from ..relay import RelayPool, is_loopback
from . import engine as engines
from .containers import ISOLATED_NETWORK, ROOT, ContainerFactory, DockerSettings
from .exec import RECORD_PID, DockerAgent, ExecStream, run_exec, run_ladder, signal_all
from .harbor import ContractCache, ImageContract, agent_env, run_as
from .images import ImageError, ImageResolver

if TYPE_CHECKING:
    from ...suites import Task

class DockerSandbox(Sandbox):
    name = "docker"
    Settings = DockerSettings

    def __init__(self, suite: Any, settings: dict[str, Any] | None = None):
        super().__init__(suite, settings)
        self.config = load_settings(DockerSettings, suite, self.settings)
        self.entries = {e.display: e for e in self.config.entries()}
        self.placement = Placement([Host(e.display, e.slots, frozenset(e.labels)) for e in self.entries.values()])
        self.engines: dict[str, engines.Engine] = {}
        self.images = ImageResolver(self.config.image, pull=self.config.pull)
        self.relays = RelayPool()
        self.gateways: dict[tuple[str, str], str | None] = {}  # (engine, network) -> where containers reach us
        self.tunnels: dict[str, Any] = {}  # remote engine -> SSH connection carrying reverse tunnels
        self.watch = HostWatch(self.placement, self._probe, self.config.probe_interval)
        self._connect_lock = asyncio.Lock()
        self._local_files: LocalSandbox | None = None
        self._bundle: Manifest | None | bool = False  # not read yet
        self.containers = ContainerFactory(self.config, suite.id, self.network_mode())
        self.contracts = ContractCache(self.config)
        self.problems: list[str] = []  # tasks whose own image failed: their trials fail, the run goes on

    def capacity(self) -> int:
        return self.placement.total_slots()

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
        unbundled = self._unbundled()
        if unbundled:
            raise engines.EngineError(f"{', '.join(unbundled)}: no runtime bundle under {default_clis_root()} "
                                      f"starts it inside a container (task images have no node or Python of "
                                      f"their own); run: agentmeter install-clis")
        for name in self.entries:
            engine = await self.engine(name)
            shapes = set()
            for task in self.suite.tasks:
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

        try:
            network = client.networks.get(mode)
        except NotFound:
            if network != "isolated":
                raise engines.EngineError(f"docker network '{mode}' does not exist on {engine.name}") from None
            network = client.networks.create(ISOLATED_NETWORK, driver="bridge", internal=True, check_duplicate=True,
                                             labels={engines.MANAGED: "1", engines.RUNNER: engines.runner_label()})
        configs = (network.attrs.get("IPAM") or {}).get("Config") or []
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
        return self.relays.translate(url, gateway)

    async def _tunnel(self, engine_name: str, url: str) -> str:
        """Remote engine, host network: a reverse SSH tunnel from the remote loopback to ours."""
        from ..relay import replace_host, target_of
        from ..ssh.conn import SshTarget, connect

        entry = self.entries[engine_name]
        key = (engine_name, target_of(url))
        if key not in self.tunnels:
            conn = self.tunnels.get(engine_name)
            if conn is None:
                conn = self.tunnels[engine_name] = await connect(SshTarget.from_url(entry.url, entry.key,
                                                                                    entry.known_hosts))
            listener = await conn.forward_remote_port("127.0.0.1", 0, *target_of(url))
            self.tunnels[key] = listener
        return replace_host(url, "127.0.0.1", self.tunnels[key].get_port())

    async def open(self, task: Task, trial_id: int, token: str) -> DockerSession:
        slot = self.placement.slot_for(token)
        host = slot.host if slot else self.placement.pick().name
        engine = await self.engine(host)
        image = await engine.call(self.images.resolve, engine.client, host, self.suite.id, task)
        session = DockerSession(self, engine, token, trial_id)
        try:
            await session.create(task, image)
        except Exception as exc:
            await session.cleanup()
            if _engine_lost(exc):
                self.watch.down(host, str(exc))
            raise
        return session

    def _unbundled(self) -> list[str]:
        """The suite's installed CLIs (npm, PyPI) that the mounted runtime bundle cannot start."""
        if self.config.clis != "mount":
            return []
        bundle = self.bundle()
        launchers = bundle.launchers if bundle is not None else {}
        missing = []
        for entry in self.suite.spec.clis:
            adapter = ADAPTERS.get(entry.adapter)
            if adapter.install.registry in ("npm", "pypi"):
                launcher = adapter().executable(self.config.clis_root)[len(self.config.clis_root) + 1:]
                if launcher not in launchers:
                    missing.append(entry.adapter)
        return missing

    def bundle(self) -> Manifest | None:
        """The mounted CLIs' runtime manifest, read once per run."""
        if self._bundle is False:
            self._bundle = load_manifest(default_clis_root())
        return self._bundle

    def local_files(self) -> LocalSandbox:
        if self._local_files is None:
            self._local_files = LocalSandbox(self.suite, {"root": str(Path(tempfile.gettempdir()) / "agentmeter-docker")})
        return self._local_files

    async def close(self) -> None:
        await self.watch.close()
        await self.containers.close(self.engines)
        await self.relays.close()
        for key, value in list(self.tunnels.items()):
            if isinstance(key, str):
                value.close()
        for engine in self.engines.values():
            engine.close()


def _engine_lost(exc: BaseException) -> bool:
    import requests

    return isinstance(exc, (ConnectionError, requests.exceptions.ConnectionError, engines.EngineError))


class DockerSession(SandboxSession):
    def __init__(self, sandbox: DockerSandbox, engine: engines.Engine, token: str, trial_id: int):
        self.sandbox, self.engine, self.token, self.trial_id = sandbox, engine, token, trial_id
        self.config = sandbox.config
        self.workspace, self.home, self.scratch = f"{ROOT}/workspace", f"{ROOT}/home", f"{ROOT}/scratch"
        self.tmp = f"{ROOT}/tmp"
        self.python = self.config.python
        self.clis_root = self.config.clis_root
        self.slot = TrialSlot("docker", engine.name)
        self.container: str | None = None
        self.agent: DockerAgent | None = None
        self.image: str | None = None  # the task's image: the differential verifier's sides start from it
        self.host_files: LocalSession | None = None  # bind mode: the folder mounted at /agentmeter
        self.contract: ImageContract | None = None  # a Harbor task: its image's WORKDIR and ENV
        self.network: str | None = None  # None: the suite's network
        self.uid = self.config.uid

    # -- lifecycle ------------------------------------------------------------------------------

    async def create(self, task: Task, image: str) -> None:
        api = self.engine.client.api
        labels = engines.trial_labels(self.sandbox.suite.id, self.trial_id, self.token)
        bind_root = None
        if self.config.workspace == "bind":
            self.host_files = await self.sandbox.local_files().open(task, self.trial_id, self.token)
            await asyncio.to_thread(self._prepare_host_root, Path(self.host_files.root))
            bind_root = str(self.host_files.root)
        name = f"agentmeter-t{self.trial_id}-{self.token[:8]}"
        self.image = image
        shape, self.contract = await self.sandbox.contracts.shape(self.engine, image, task)
        if shape.network:  # allow_internet = false on a suite network that has a route out
            self.network = "isolated"
            await self.sandbox.gateway(self.engine, self.network)
        if self.contract is not None:
            self.workspace = self.contract.workdir
            self.uid = int(run_as(self.config).split(":")[0])
        self.container, started = await self.sandbox.containers.take(self.engine, image, name, labels, bind_root,
                                                                     shape)
        if bind_root is None:
            await self.engine.call(api.put_archive, self.container, ROOT, self._seed_tar(task))
        if self.contract is not None and task.workspace_seed is not None:
            seed = TarWriter(uid=self.uid)
            seed.tree("", task.workspace_seed)
            await self.engine.call(api.put_archive, self.container, self.workspace, seed.getvalue())
        if not started:
            await self.engine.call(api.start, self.container)

    @property
    def harbor(self) -> bool:
        """Whether this trial runs under Harbor's contract (its verifier checks)."""
        return self.contract is not None

    def _user(self) -> str:
        if self.contract is not None:
            return run_as(self.config)
        return "0:0" if self.config.uid == 0 else self.config.user

    def _seed_tar(self, task: Task) -> bytes:
        tar = TarWriter(uid=self.uid)
        for folder in ("workspace", "home", "scratch"):
            tar.folder(folder)
        tar.folder("tmp", 0o1777)
        if task.workspace_seed is not None and self.contract is None:
            tar.tree("workspace", task.workspace_seed)
        tar.folder("tools", uid=0)  # ours, read-only to the agent
        tar.files("", shipped_files(), uid=0)
        return tar.getvalue()

    def _prepare_host_root(self, root: Path) -> None:
        for rel, data in shipped_files().items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        (root / "tmp").chmod(0o1777)
        _chown_tree(root, self.config.uid)

    async def translate_url(self, url: str) -> str:
        return await self.sandbox.translate_url(url, self.engine.name, self.network)

    def environment(self, extra: dict[str, str], cwd: str | None = None) -> dict[str, str]:
        if self.contract is not None:
            return agent_env(self.contract, extra, home=self.home, cwd=cwd or self.workspace, token=self.token)
        env = trial_env(home=self.home, workspace=cwd or self.workspace, tmp=self.tmp, token=self.token,
                        user="root" if self.config.uid == 0 else "agent", extra=extra)
        env["PWD"] = cwd or self.workspace
        return env

    async def start(self, spec: LaunchSpec, on_output: OutputCallback) -> DockerAgent:
        api = self.engine.client.api
        cwd = spec.cwd or self.workspace
        argv = [*RECORD_PID, *self._native(map_argv(spec.argv, ROOT))]
        exec_id = (await self.engine.call(api.exec_create, self.container, argv,
                                          environment=self.environment(spec.env, cwd), workdir=cwd,
                                          user=self._user()))["Id"]
        stream = ExecStream(self.engine, exec_id, on_output, asyncio.get_running_loop())
        stream.start()
        self.agent = DockerAgent(self.engine, exec_id, stream,
                                 on_lost=lambda exc: self.sandbox.watch.down(self.engine.name, str(exc)))
        with contextlib.suppress(*engines.engine_errors()):  # the pid is for display only
            self.agent.pid = (await self.engine.call(api.exec_inspect, exec_id)).get("Pid") or None
        return self.agent

    def _native(self, argv: list[str]) -> list[str]:
        """A mounted CLI's launcher becomes the command that runs it on the runtime bundle
        (``clisbundle.py``): the image needs no node, no Python, and its libc is not used."""
        if self.config.clis != "mount":
            return argv
        return container_argv(argv, self.clis_root, self.sandbox.bundle())

    async def exec(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                   timeout: float | None = None) -> ExecResult:
        run = self.engine.call(run_exec, self.engine, self.container, map_argv(argv, ROOT),
                               env=self.environment(env or {}, cwd), cwd=cwd or self.workspace, user="0")
        task = asyncio.ensure_future(run)
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            await self.engine.call(signal_all, self.engine, self.container, "KILL")
            result = await task
            result.timed_out = True
            return result

    async def kill(self, policy: KillPolicy) -> None:
        """The signal ladder inside the container (``run_ladder``), then the container killed."""
        if self.container is None:
            return
        if self.agent is not None:
            await self.engine.call(run_ladder, self.engine, self.container, policy.int_grace, policy.grace)
        await self._kill_container()

    async def _kill_container(self) -> None:
        api = self.engine.client.api
        with contextlib.suppress(*engines.engine_errors()):  # already stopped, or gone
            await self.engine.call(api.kill, self.container)
            await self.engine.call(api.wait, self.container, timeout=10, condition="not-running")

    # -- files ----------------------------------------------------------------------------------

    def _path(self, base: str) -> str:
        """A base name ("home", "workspace", "scratch") or an absolute path in the container."""
        if base.startswith("/"):
            return base.rstrip("/") or "/"
        return self.workspace if base == "workspace" else f"{ROOT}/{base}"

    def _bound(self, base: str) -> bool:
        """Whether ``base`` is in the bind-mounted folder of this machine (bind mode)."""
        return self.host_files is not None and base in ("home", "workspace", "scratch") and \
            self._path(base).startswith(ROOT + "/")

    async def write_files(self, base: str, files: dict[str, bytes]) -> None:
        if self._bound(base):
            await self.host_files.write_files(base, files)
            await asyncio.to_thread(_chown_tree, Path(self.host_files.root) / base, self.uid)
            return
        path = self._path(base)
        tar = TarWriter(uid=self.uid)
        if base.startswith("/"):  # made with its parents: /solution, /tests need not exist yet
            tar.files(path.lstrip("/"), files)
            path = "/"
        else:
            tar.files("", files)
        await self.engine.call(self.engine.client.api.put_archive, self.container, path, tar.getvalue())

    async def write_solution(self, files: dict[str, bytes]) -> str:
        if self.contract is None:
            return await super().write_solution(files)
        await self.write_files("/solution", files)  # where Harbor puts it: solve.sh may `cd /solution`
        return "/solution"

    async def _copy_out(self, path: str, dest: Path, limit_bytes: int | None = None) -> Path:
        """``path`` of the container copied to ``dest/<its name>``, which is returned."""
        def fetch() -> Path:
            chunks, _ = self.engine.client.api.get_archive(self.container, path)
            return extract(chunks, dest, limit_bytes)

        await self.engine.call(fetch)
        return dest / os.path.basename(path)

    async def fetch_files(self, base: str, patterns: list[str], limit_bytes: int = 64 << 20) -> dict[str, bytes]:
        if self._bound(base):
            return await self.host_files.fetch_files(base, patterns, limit_bytes)
        from docker.errors import NotFound

        with tempfile.TemporaryDirectory(prefix="agentmeter-fetch-") as tmp:
            try:
                folder = await self._copy_out(self._path(base), Path(tmp), limit_bytes)
            except NotFound:  # e.g. /logs/verifier of a task whose tests removed it
                return {}
            return read_globs(folder, patterns, limit_bytes)

    async def collect_workspace(self, dest: Path) -> Path:
        if self._bound("workspace"):
            return Path(self.host_files.workspace)
        if self.workspace == "/":
            raise RuntimeError("the task's working folder is /: not copied out whole")
        return await self._copy_out(self.workspace, dest)

    async def cleanup(self, keep: bool = False) -> None:
        if self.container is not None:
            if keep and self.host_files is None:
                kept = Path(tempfile.gettempdir()) / "agentmeter-kept" / f"t{self.trial_id}-{self.token}"
                with contextlib.suppress(*engines.engine_errors(), tarfile.TarError, RuntimeError):
                    await self.collect_workspace(kept)
            try:  # force = SIGKILL and remove at once: no stop timeout; v = its anonymous volume too
                await self.engine.call(self.engine.client.api.remove_container, self.container, force=True, v=True)
            except engines.engine_errors() as exc:
                if "No such container" not in str(exc):
                    raise
        if self.host_files is not None:
            await self.host_files.cleanup(keep)


def _chown_tree(root: Path, uid: int) -> None:
    """Give the agent's user the folders it works in (bind mode; only root may chown)."""
    if os.geteuid() != 0 or uid == 0:
        return
    os.chown(root, uid, uid)
    for folder, subdirs, files in os.walk(root):
        for name in subdirs + files:
            os.lchown(os.path.join(folder, name), uid, uid)


__all__ = ["DockerSandbox", "DockerSession", "DockerSettings"]
