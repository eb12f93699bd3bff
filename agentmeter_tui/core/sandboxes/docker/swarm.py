"""The swarm sandbox: each trial is a one-shot Docker Swarm service that Swarm places on its nodes.

A trial's files live on the runner (a local mirror of the job's ``/agentmeter``: workspace,
home, tmp, scratch, tools). A job gets them as a gzipped tar in a swarm config, unpacks
them into a tmpfs, runs its command as the non-root user with CPU and memory reserved, and
after the command exits prints a marker with its exit code and the tar of its files back on
stdout, base64, so the runner can collect the workspace from any node through the service
logs, which it streams line by line meanwhile. The agent is one job; a verifier's command
(``exec``) is another job on the collected files. Kill = remove the service: Swarm sends
the stop signal (SIGINT) and SIGKILL after ``stop_grace`` seconds; never a 10 s timeout.

Limits: a config holds at most 500 KB, so a workspace must compress below that (bake
bigger ones into the task's image); containers of finished jobs on other nodes are removed
by Swarm, those on this node by the runner.

A task that follows Harbor's contract runs otherwise: one service per trial whose container
the agent and the verifier exec into, through the engine of the node it runs on: the manager's,
or one named in ``node_engines`` (``swarmharbor.py``, ``nodeengines.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from ...install.clisbundle import Manifest, load_manifest
from ...paths import default_clis_root
from ...run.placement import Host, Placement
from ..archive import TarWriter, extract
from ..base import (
    AgentHandle,
    ExecResult,
    KillPolicy,
    LaunchSpec,
    OutputCallback,
    SandboxSession,
    TrialSlot,
)
from ...harbor.contract import ContractCache
from ..common import HostWatch, Settings, load_settings, map_argv, resolve_path, shipped_files, trial_env
from ..hostcheck import HostCheck, check_docker_engine
from ..local import LocalSession, remove_root
from ..relay import RelayPool, is_loopback, replace_host, target_of
from . import engine as engines
from .containers import sweep
from .fleet import NodeWatch, Publisher
from .hostwall import HostWall
from .images import HOST_IMAGE, ImageError, ImageResolver
from .leftovers import EngineSandbox, EngineTarget
from .limits import SIZE_PATTERN
from .nodeengines import NodeEngines
from .nodewall import WALLED, NodeWalls, host_network_note, walled_network
from .rootfs import AGENT_UID
from .session import check_bundle
from .swarmharbor import SwarmHarborSession
from .swarmjob import ROOT, Job

if TYPE_CHECKING:
    from ...suites.suite import Task

class SwarmSettings(Settings):
    engine: str | None = None  # a manager's URL; default DOCKER_HOST or the local socket
    key: str | None = None
    known_hosts: str | None = None
    slots: int = Field(8, ge=1, le=4096)  # jobs at once; Swarm decides where each one runs
    image: str = HOST_IMAGE
    pull: bool = False
    # "walled": jobs reach their model relay and nothing else (``nodewall.py``); "host": the
    # node's host network, said by the suite (jobs reach all the node reaches); else a network's name
    network: str = WALLED
    relay_address: str | None = None  # an address of this machine every node reaches (multi-node)
    cpus: float = Field(1.0, gt=0)
    memory: str = Field("1g", pattern=r"^\d+[bkmgBKMG]?$")
    pids: int | None = Field(1024, ge=16)  # processes per job (a service's Limits.Pids)
    workspace_size: str = Field("2g", pattern=SIZE_PATTERN)  # a job's /agentmeter tmpfs (``limits.py``)
    tmp_size: str = Field("256m", pattern=SIZE_PATTERN)
    user: str = Field(f"{AGENT_UID}:{AGENT_UID}", pattern=r"^(root|\d+(:\d+)?)$")
    python: str = "python3"
    clis_root: str = "/opt/agentmeter/clis"  # where the image has the CLIs (Harbor tasks: where .clis is mounted)
    stop_grace: float = Field(2.0, gt=0)
    start_timeout: float = Field(120.0, gt=0)  # a job no node takes in this long is infra-invalid
    # host:port of a registry every node pulls from (a fleet's, docs/fleet.md): task images are
    # built once on the manager and pushed there, never built per node
    registry: str | None = Field(None, pattern=r"^[A-Za-z0-9.-]+(:\d+)?(/[a-z0-9._/-]+)?$")
    # node host name -> its engine's URL (ssh://, unix://): Harbor trials run on these nodes too,
    # driven through their own engine (``nodeengines.py``); without, only on the manager's node
    node_engines: dict[str, str] = Field(default_factory=dict)

    _paths = field_validator("key", "known_hosts")(resolve_path)


class SwarmSandbox(EngineSandbox):
    name = "swarm"
    Settings = SwarmSettings

    def __init__(self, suite: Any, settings: dict[str, Any] | None = None):
        super().__init__(suite, settings)
        self.config = load_settings(SwarmSettings, suite, self.settings)
        self.host_name = f"swarm:{self.config.engine or 'local'}"
        self.placement = Placement([Host(self.host_name, self.config.slots)])
        self.images = ImageResolver(self.config.image, pull=self.config.pull,
                                    on_progress=lambda text: self.on_progress(text))
        self.publisher = (Publisher(self.config.registry, say=lambda text: self.on_progress(text))
                          if self.config.registry else None)
        self.nodes = NodeWatch()
        self.node_engines = NodeEngines(self.config.node_engines, key=self.config.key,
                                        known_hosts=self.config.known_hosts)
        self.relays = RelayPool()
        self.walls: dict[str, HostWall] = {}  # closed Harbor trials' bridges (``swarmharbor.py``)
        self.node_walls = NodeWalls(suite.id, self.config.start_timeout, self.nodes,
                                    self.publisher.publish if self.publisher is not None else None)
        self.walled: str | None = None  # the walled network's name, once made (``network = "walled"``)
        self.walled_bridge = ""
        self.engine: engines.Engine | None = None
        self.watch = HostWatch(self.placement, self._probe, 10.0)
        self._lock = asyncio.Lock()
        self.contracts = ContractCache(self.config)
        self._bundle: Manifest | None = None
        self._bundle_read = False
        self.problems: list[str] = []  # tasks whose own image failed: their trials fail, the run goes on

    def capacity(self) -> int:
        return self.config.slots

    def engine_targets(self) -> list[EngineTarget]:
        return [(self.config.engine, self.config.key, self.config.known_hosts)]

    async def check_hosts(self) -> list[HostCheck]:
        config = self.config
        found = await asyncio.to_thread(check_docker_engine, config.engine, None, key=config.key,
                                        known_hosts=config.known_hosts, clis="image")
        if found and found[0].ok and not any("(manager)" in c.detail for c in found):
            found.append(HostCheck(f"docker {config.engine or 'local'}: swarm", False,
                                   "not a swarm manager", "docker swarm init (or name a manager in engine)"))
        return found

    async def connect(self) -> engines.Engine:
        async with self._lock:
            if self.engine is None:
                config = self.config
                client = await asyncio.to_thread(engines.connect, config.engine, key=config.key,
                                                 known_hosts=config.known_hosts)
                info = await asyncio.to_thread(client.info)
                swarm = info.get("Swarm") or {}
                if not swarm.get("ControlAvailable"):
                    raise engines.EngineError(
                        f"docker engine {config.engine or 'local'} is not a swarm manager (swarm state "
                        f"{swarm.get('LocalNodeState', '?')}); run `docker swarm init` there or name a manager")
                self.engine = engines.Engine(self.host_name, config.engine, client,
                                             engines.is_local_url(config.engine), info=info)
            return self.engine

    async def _probe(self, name: str) -> None:
        engine = await self.connect()
        await engine.call(engine.client.ping)

    async def wall(self, engine: engines.Engine) -> str | None:
        """The network a trial's service joins when the suite leaves ``network`` at "walled"
        (made, with the wall's image, on first use); None otherwise. Harbor trials
        (``swarmharbor.py``) and our own jobs both take it from here."""
        if self.config.network != WALLED:
            return None
        async with self._lock:
            if self.walled is None:
                self.walled, self.walled_bridge = await engine.call(walled_network, engine.client)
                await engine.call(self.node_walls.prepare, engine.client)
        return self.walled

    async def preflight(self) -> None:
        engine = await self.connect()
        await self.wall(engine)
        for number, task in enumerate(self.suite.tasks, 1):
            self.on_progress(f"task images: {number}/{len(self.suite.tasks)} ({task.id})")
            try:
                await self.image(engine, task)
            except ImageError as exc:
                if exc.task is None:  # the suite's own image: nothing can run
                    raise
                # The task's own image (its Dockerfile failed): its trials end infra-invalid with
                # the reason, the run goes on (as in the docker sandbox).
                self.problems.append(str(exc))
        if any(t.contract.agent_from_bundle for t in self.suite.tasks) and engine.local and default_clis_root().is_dir():
            check_bundle(self.suite, self.config.clis_root, self.bundle())  # .clis is mounted into their images

    async def image(self, engine: engines.Engine, task: Task) -> str:
        """The task's image as the nodes name it: on a fleet with a registry, the pushed copy."""
        image = await engine.call(self.images.resolve, engine.client, self.host_name, self.suite.id, task)
        if self.publisher is not None:
            image = await engine.call(self.publisher.publish, engine.client, image)
        return image

    def fleet_nodes(self) -> list[dict[str, Any]]:
        """The nodes' names, states (ready, drain, down), slots and last-seen times as last read."""
        from docker.utils import parse_bytes

        return self.nodes.summary(self.config.cpus, parse_bytes(self.config.memory))

    async def read_nodes(self) -> None:
        engine = await self.connect()
        await engine.call(self.nodes.refresh, engine.client)

    async def set_node(self, name: str, availability: str) -> None:
        engine = await self.connect()
        await engine.call(self.nodes.set_availability, engine.client, name, availability)
        await engine.call(self.nodes.refresh, engine.client)

    def bundle(self) -> Manifest | None:
        """The mounted CLIs' runtime manifest (Harbor tasks), read once per run."""
        if not self._bundle_read:
            self._bundle, self._bundle_read = load_manifest(default_clis_root()), True
        return self._bundle

    def translate_url(self, url: str) -> Any:
        if not is_loopback(url):
            return url
        if self.config.network == WALLED:
            return self._walled_url(url)
        if self.config.relay_address:
            return self.relays.translate(url, self.config.relay_address)
        if self.config.network == "host":
            return url
        raise RuntimeError(f"the model at {url} is on this machine's loopback: jobs reach it only with "
                           f"network = \"host\" (on this node) or a relay_address every node reaches")

    async def _walled_url(self, url: str) -> str:
        """``url`` (on this machine's loopback) as a job on the walled network reaches it: the
        wall's relay on its node, which forwards to the runner's relay on ``relay_address`` (a
        fleet) or, on this machine's own engine, to the loopback service itself."""
        engine = await self.connect()
        await self.wall(engine)
        target = target_of(self.relays.translate(url, self.config.relay_address) if self.config.relay_address
                           else url)
        if not self.config.relay_address and not engine.local:
            raise RuntimeError(f"the model at {url} is on this machine's loopback: a remote manager's nodes reach "
                               f"it only through a relay_address every node reaches")
        host, port = await engine.call(self.node_walls.route, engine.client, self.walled_bridge, target)
        return replace_host(url, host, port)

    async def open(self, task: Task, trial_id: int, token: str) -> SwarmSession | SwarmHarborSession:
        engine = await self.connect()
        await self.wall(engine)
        image = await self.image(engine, task)
        if task.contract.image_contract:
            harbor = SwarmHarborSession(self, engine, image, trial_id, token)
            try:
                await harbor.create(task)
            except BaseException:
                await harbor.cleanup()
                raise
            return harbor
        session = SwarmSession(self, engine, image, trial_id, token)
        await session.create(task)
        return session

    async def close(self) -> None:
        await self.watch.close()
        await self.relays.close()
        for wall in self.walls.values():
            await asyncio.to_thread(wall.close)
        if self.engine is not None:
            await self.engine.call(self.node_walls.close, self.engine.client)
            # What a manager that was gone for a while kept: each trial removes its own service,
            # but not while the engine does not answer.
            if problem := await self.engine.call(sweep, self.engine, self.suite.id, True):
                print(f"agentmeter: {problem}", file=sys.stderr, flush=True)
            self.engine.close()
        self.node_engines.close()


class SwarmAgent(AgentHandle):
    def __init__(self, session: SwarmSession, job: Job):
        self.session, self.job = session, job
        self.pid: int | None = None

    async def wait(self) -> int:
        job = self.job
        await self.session.engine.call(job.watch_state)
        await self.session.settled(job)
        await job.finish_streams()
        if job.exit_code is None:
            if self.session.killed:
                return -1
            raise ConnectionError(job.missing_exit())
        await self.session.absorb(job)
        return job.exit_code


class SwarmSession(SandboxSession):
    def __init__(self, sandbox: SwarmSandbox, engine: engines.Engine, image: str, trial_id: int, token: str):
        self.sandbox, self.engine, self.image = sandbox, engine, image
        self.config, self.trial_id, self.token = sandbox.config, trial_id, token
        self.workspace, self.home, self.scratch, self.tmp = (f"{ROOT}/{d}" for d in ("workspace", "home", "scratch",
                                                                                     "tmp"))
        self.python, self.clis_root = self.config.python, self.config.clis_root
        self.user = "0:0" if self.config.user == "root" else self.config.user
        self.slot = TrialSlot("swarm", sandbox.host_name)
        self.mirror = Path(tempfile.mkdtemp(prefix=f"agentmeter-swarm-t{trial_id}-"))
        self.files = LocalSession(self.mirror, token)  # the runner's copy of the job's /agentmeter
        self.files.noting = self.note
        self.jobs = 0
        self.agent_job: Job | None = None
        self.killed = False
        self.task: Task | None = None  # its [environment] capabilities go to every job

    async def create(self, task: Task) -> None:
        self.task = task
        if note := host_network_note(self.config.network):
            self.note(note)

        def prepare() -> None:
            for folder in ("workspace", "home", "tmp", "scratch"):
                (self.mirror / folder).mkdir(exist_ok=True)
            if task.workspace_seed is not None:
                shutil.rmtree(self.mirror / "workspace")
                shutil.copytree(task.workspace_seed, self.mirror / "workspace", symlinks=True)
            for rel, data in shipped_files().items():
                (self.mirror / rel).parent.mkdir(parents=True, exist_ok=True)
                (self.mirror / rel).write_bytes(data)

        await asyncio.to_thread(prepare)

    def translate_url(self, url: str) -> str:
        return self.sandbox.translate_url(url)

    def _files_tar(self) -> bytes:
        tar = TarWriter(uid=0 if self.user == "0:0" else int(self.user.split(":")[0]), gzip=True)
        for folder in ("workspace", "home", "tmp", "scratch", "tools"):
            if (self.mirror / folder).is_dir():
                tar.tree(folder, self.mirror / folder)
        return tar.getvalue()

    async def absorb(self, job: Job) -> None:
        """Take the job's files back into the mirror (the workspace the verifier sees)."""
        data = job.files()
        if data is None:
            return
        if not data:  # the job could not archive them: the mirror keeps what it had, and the trial says so
            raise RuntimeError(f"swarm job {job.service_id}: its files came back empty (its container could "
                               "not run tar after the command)")

        def replace() -> None:
            for folder in ("workspace", "home", "scratch"):
                remove_root(self.mirror / folder)  # however deep the job nested its folders
            extract(data, self.mirror)

        await asyncio.to_thread(replace)

    async def _submit(self, argv: list[str], env: dict[str, str] | None, cwd: str | None,
                      on_output: OutputCallback | None) -> Job:
        cwd = cwd or self.workspace
        environment = trial_env(home=self.home, workspace=cwd, tmp=self.tmp, token=self.token,
                                user="root" if self.user == "0:0" else "agent", extra=env)
        job = Job(self, map_argv(argv, ROOT), environment, cwd, on_output)
        await self.engine.call(job.submit, await asyncio.to_thread(self._files_tar))
        return job

    async def settled(self, job: Job) -> None:
        """After the job's task ended: say the nodes it shunned (``Job._shun_node``)."""
        for note in job.notes:
            self.note(note)
        job.notes.clear()

    async def start(self, spec: LaunchSpec, on_output: OutputCallback) -> SwarmAgent:
        for note in self.sandbox.node_walls.notes:
            self.note(note)
        self.agent_job = await self._submit(spec.argv, spec.env, spec.cwd, on_output)
        self.slot.node = await self.engine.call(self.agent_job.placed)  # recorded with the trial
        return SwarmAgent(self, self.agent_job)

    async def exec(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                   timeout: float | None = None) -> ExecResult:
        started = time.monotonic()
        job = await self._submit(argv, env, cwd, None)
        timed_out = False
        try:
            await asyncio.wait_for(self.engine.call(job.watch_state), timeout)
            await self.settled(job)
            await job.finish_streams()
            await self.absorb(job)
        except TimeoutError:
            timed_out = True
        finally:
            await self.engine.call(job.remove)
        if job.exit_code is None and not timed_out:  # no verdict rather than a wrong one
            raise ConnectionError(job.missing_exit())
        code = job.exit_code if job.exit_code is not None else -1
        out, err = (b"".join(line + b"\n" for line in job.collected[name]) for name in ("stdout", "stderr"))
        return ExecResult(code, out, err, time.monotonic() - started, timed_out)

    async def kill(self, policy: KillPolicy) -> None:
        """SIGINT, then SIGKILL after ``int_grace``, straight to the job's container when it runs on
        this node (Swarm relays a removal to its node in one to five seconds); then remove the
        service, which stops the container wherever it runs (the stop signal, SIGKILL after
        ``stop_grace``), and wait (bounded) until no container of the trial runs here."""
        self.killed = True
        job = self.agent_job
        if job is None:
            return
        if await self.engine.call(self._signal_here, "SIGINT") and \
                not await self.engine.call(self._wait_stopped, policy.int_grace):
            await self.engine.call(self._signal_here, "SIGKILL")
        await self.engine.call(job.remove)
        await self.engine.call(self._wait_stopped, self.config.stop_grace + 5)
        await self.engine.call(self._remove_containers)

    def _containers(self, *, all: bool = False) -> list[Any]:
        selector = {"label": f"{engines.TRIAL}={self.token}"}
        try:
            return self.engine.client.containers.list(all=all, filters=selector)
        except engines.engine_errors():
            return []

    def _signal_here(self, signal: str) -> bool:
        running = self._containers()
        for container in running:
            with contextlib.suppress(*engines.engine_errors()):  # it exited meanwhile
                container.kill(signal)
        return bool(running)

    def _wait_stopped(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._containers():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _remove_containers(self) -> None:
        for container in self._containers(all=True):
            # Stopped containers of removed services linger; on this node they are ours to remove,
            # with their anonymous volumes (a differential side's case folders live in one).
            with contextlib.suppress(*engines.engine_errors()):
                container.remove(force=True, v=True)

    async def write_files(self, base: str, files: dict[str, bytes]) -> None:
        await self.files.write_files(base, files)

    async def fetch_files(self, base: str, patterns: list[str], limit_bytes: int = 64 << 20) -> dict[str, bytes]:
        return await self.files.fetch_files(base, patterns, limit_bytes)

    async def collect_workspace(self, dest: Path) -> Path:
        return Path(self.files.workspace)

    async def cleanup(self, keep: bool = False) -> None:
        if self.agent_job is not None:
            await self.engine.call(self.agent_job.remove)
        await self.engine.call(self._remove_containers)
        if not keep:
            await asyncio.to_thread(remove_root, self.mirror)


__all__ = ["SwarmSandbox", "SwarmSession", "SwarmSettings"]
