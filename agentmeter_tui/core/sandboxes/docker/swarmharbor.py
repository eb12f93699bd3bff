"""Harbor tasks in the swarm sandbox: one long-lived service per trial, then the docker
sandbox's session (``session.py``) on its container.

Our own swarm jobs (``swarmjob.py``) carry the trial's files in and out through a config and
the service's logs, a new job per command. Harbor's contract needs more: the agent's changes
to the image's own filesystem (``/app``, ``/usr``...) are what the verifier checks, in the
same container. So a Harbor trial's service runs the task's image (built or loaded on the
manager, ``images.py``) with the keep-alive under Docker's init, as root, in the image's
WORKDIR, on its writable root filesystem, within the task's ``cpus`` and ``memory_mb`` as
service limits; once Swarm reports its container running, the agent and the verifier are
execs in it, the files go in and out as tar archives, a kill is the in-container signal
ladder, exactly as in the docker sandbox. Cleanup removes the service and the container.

Execs reach only containers of the engine they are sent to. The service is created through
the manager; once Swarm has placed it, the session drives its container through the engine of
the node it runs on (``nodeengines.py``: the sandbox's ``node_engines``, node host name -> engine
URL), and records that node. Placement constraints keep the service on the manager and the
nodes named there (only the manager's node when none are). A node lost under a trial (its
engine gone, or Swarm says it is down) ends the attempt infra-invalid ("lost"), and the runner
reruns it elsewhere, as for our own swarm jobs; the service is removed through the manager, and
the node drops the container when it is back.

``allow_internet = false`` on the walled network (the suite's default ``network``): the
service joins it as any trial's does and may go to any node, whose wall lets it reach its
model's relay and nothing else (``nodewall.py``). On a suite network with a route out (``host``,
a named one), when the manager is this machine's engine, the service joins
``agentmeter-isolated-swarm``, an internal bridge network of swarm scope (a service can join
only a network of that scope, not the docker sandbox's local ``agentmeter-isolated``); the
bridge's gateway on this node is this machine, where a relay to the model server or metering
proxy listens, the one thing the agent reaches, as in the docker sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from ...harbor.contract import EngineLimits, ImageContract, open_network, run_as, unenforced
from ...install.clisbundle import Manifest
from ...paths import default_clis_root
from ..base import AgentHandle, LaunchSpec, OutputCallback, TrialSlot
from ..relay import is_loopback
from . import engine as engines
from .containers import KEEPALIVE
from .fleet import PLACEMENTS, NodeWatch, pinned, stale_network
from .hostwall import CLOSED_CHAIN, HostWall
from .limits import confined, service_limits
from .nodewall import WALLED, job_networks
from .session import ContainerSession
from .swarmjob import TERMINAL

if TYPE_CHECKING:
    from ...harbor.contract import ContractCache
    from ...suites.suite import Suite, Task
    from ..common import HostWatch
    from ..relay import RelayPool
    from .nodeengines import NodeEngines
CLOSED_NETWORK = "agentmeter-isolated-swarm"


def closed_network(client: Any) -> str:
    """Blocking: the internal bridge network of swarm scope that closed Harbor trials join,
    made on first use (by whichever runner gets there first) and kept, like the docker
    sandbox's isolated network; ``doctor --clean`` removes it once its runner is gone."""
    from docker.errors import APIError, NotFound

    try:
        client.networks.get(CLOSED_NETWORK)
    except NotFound:
        try:
            client.networks.create(CLOSED_NETWORK, driver="bridge", scope="swarm", internal=True,
                                   check_duplicate=True,
                                   labels={engines.MANAGED: "1", engines.RUNNER: engines.runner_label()})
        except APIError as exc:  # another trial or runner made it meanwhile
            # A swarm manager says so with a 500 ("name conflicts with an existing object"), a
            # plain engine with a 409: trials of closed tasks starting at once met it.
            if exc.status_code != 409 and not any(s in str(exc) for s in ("already exists", "name conflicts")):
                raise
    return CLOSED_NETWORK


class HarborHost(Protocol):
    """What a Harbor task's session reads of its sandbox (:class:`~.swarm.SwarmSandbox`); named
    here so that this module does not import the one that imports it."""

    config: Any  # the swarm sandbox's Settings
    suite: Suite
    host_name: str
    relays: RelayPool
    walls: dict[str, HostWall]  # bridge -> its filter
    watch: HostWatch
    contracts: ContractCache
    nodes: NodeWatch
    node_engines: NodeEngines

    def bundle(self) -> Manifest | None: ...

    def translate_url(self, url: str) -> str: ...


class NodeBoundAgent(AgentHandle):
    """The agent's exec on a worker, watched with its node: when the manager says the node is
    no longer ready (its link cut: an exec stream over it may hang for minutes rather than
    break), the attempt ends "lost" within the bound of our own swarm jobs (docs/fleet.md)."""

    def __init__(self, session: SwarmHarborSession, inner: AgentHandle):
        self.session, self.inner, self.pid = session, inner, inner.pid

    async def wait(self) -> int:
        waiting = asyncio.ensure_future(self.inner.wait())
        watching = asyncio.ensure_future(self.session.node_lost())
        try:
            await asyncio.wait({waiting, watching}, return_when=asyncio.FIRST_COMPLETED)
            if waiting.done():
                return waiting.result()
            raise ConnectionError(watching.result())
        finally:
            for left in (waiting, watching):
                left.cancel()


class SwarmHarborSession(ContainerSession):
    def __init__(self, sandbox: HarborHost, engine: engines.Engine, image: str, trial_id: int, token: str):
        config = sandbox.config
        super().__init__(engine, token, trial_id, python=config.python, clis_root=config.clis_root, uid=0,
                         slot=TrialSlot("swarm", sandbox.host_name, node=engine.info.get("Name")))
        self.sandbox, self.config, self.image = sandbox, config, image
        self.manager = engine  # services are made and removed here; the container is driven on its node's engine
        self.node_id: str | None = None  # the node Swarm placed the trial on
        self.service_id: str | None = None
        self.gateway: str | None = None  # set on the closed network (allow_internet = false)
        self.wall: HostWall | None = None  # the closed network's bridge, filtered on this machine
        # The task's image has no CLIs: the runner's .clis is mounted (a folder of this machine,
        # so a local manager only; a remote one's images must have them at clis_root).
        self.mount_clis = engine.local and default_clis_root().is_dir()

    def bundle(self) -> Manifest | None:
        return self.sandbox.bundle() if self.mount_clis else None

    def translate_url(self, url: str) -> str:
        if self.gateway is None:
            return self.sandbox.translate_url(url)
        if not is_loopback(url):  # on the closed network: the relay on its gateway, or nothing
            return url
        relayed = self.sandbox.relays.translate(url, self.gateway)
        if self.wall is not None:  # a few ms, once per relay
            self.wall.allow(self.gateway, urlsplit(relayed).port or 80)
        return relayed

    @property
    def remote(self) -> bool:
        """Whether the container runs on another node than the manager's (its own engine)."""
        return self.engine is not self.manager

    def engine_lost(self, exc: BaseException) -> None:
        if self.remote:  # that node, not the manager: its next trial connects anew
            self.sandbox.node_engines.forget(self.slot.node or "")
        else:
            self.sandbox.watch.down(self.sandbox.host_name, str(exc))

    async def create(self, task: Task) -> None:
        engine = self.manager
        assert self.image is not None  # given to __init__: a Harbor trial's service runs its task's image
        contract, limits = await self.sandbox.contracts.contract(engine, self.image, task)
        self.adopt(contract, run_as(self.config))
        self.notes += unenforced(task, limits)
        network = None
        # On the walled network (the default) a closed task is closed already, on any node: every
        # node's wall lets it reach its model's relay and nothing else (nodewall.py). Only a suite
        # network with a route out needs the closed one, whose relay exists on this machine only.
        if self.config.network in (WALLED, "none") or task.spec.environment.allow_internet:
            pass
        elif not engine.local:  # the closed network's relay would have to listen on that node
            self.notes += open_network(task, self.config.network, "on a remote swarm manager")
        else:
            network = await engine.call(closed_network, engine.client)
        try:
            await engine.call(self._create_service, task, contract, limits, network)
        except engines.engine_errors() as exc:
            if network is None or "not found" not in str(exc):
                raise
            # `doctor --clean` removed the shared network in between (unused, and its maker's run
            # over): make it again, once.
            network = await engine.call(closed_network, engine.client)
            await engine.call(self._create_service, task, contract, limits, network)
        self.container = await engine.call(self._wait_running)
        await self._drive_on_node()
        if network is not None:
            self.gateway, bridge = await engine.call(self._gateway, network)
            self.wall = self.sandbox.walls.setdefault(bridge, HostWall(bridge, CLOSED_CHAIN, peers=True))
            if note := self.wall.note():
                self.notes.append(note)
        await self.engine.call(self.engine.client.api.put_archive, self.container, "/", self.root_tar(task))

    async def _drive_on_node(self) -> None:
        """Record the node Swarm placed the trial on; on a worker, drive the container through
        that node's engine from now on."""
        manager = self.manager
        name = await manager.call(self.sandbox.nodes.name, manager.client, self.node_id)
        self.slot.node = name
        if self.node_id != (manager.info.get("Swarm") or {}).get("NodeID"):
            try:
                self.engine = await manager.call(self.sandbox.node_engines.engine, name)
            except engines.EngineError as exc:  # its engine went away as Swarm placed the trial there
                raise ConnectionError(f"swarm node {name} lost: {exc}") from None

    async def start(self, spec: LaunchSpec, on_output: OutputCallback) -> AgentHandle:
        agent = await super().start(spec, on_output)
        return NodeBoundAgent(self, agent) if self.remote else agent

    async def node_lost(self, period: float = 1.0) -> str:
        """Returns (why) once the manager says the trial's node is not ready; never otherwise.
        One read of the node list per ``period`` is shared by every trial (``NodeWatch``)."""
        manager = self.manager
        while True:
            with contextlib.suppress(*engines.engine_errors()):  # the manager's loss: the exec says so
                if lost := await manager.call(self.sandbox.nodes.lost, manager.client, self.node_id):
                    return f"swarm node {lost.name} lost (state {lost.state}): the trial there is gone"
            await asyncio.sleep(period)

    def _constraints(self, closed: bool) -> list[str] | None:
        """Blocking: where the trial's service may go (``NodeEngines.constraints``); a closed
        trial stays on the manager's node (the module's docstring says why)."""
        manager = (self.manager.info.get("Swarm") or {}).get("NodeID")
        if closed:
            return [f"node.id=={manager}"] if manager else None
        placed = self.sandbox.node_engines.constraints(manager, self.sandbox.nodes.refresh(self.manager.client))
        return [*(placed or []), *self.sandbox.nodes.avoid()] or None

    def _create_service(self, task: Task, contract: ImageContract, limits: EngineLimits, network: str | None) -> None:
        """Blocking: the trial's service, on a node whose engine we reach, never restarted."""
        self._spec = (task, contract, limits, network)  # made again if a node rejects it (_wait_running)
        from docker.types import Mount, Resources, RestartPolicy, ServiceMode
        from docker.utils import parse_bytes

        config, client, image = self.config, self.manager.client, self.image
        assert image is not None  # given to __init__
        env = task.spec.environment
        cpus = min(env.cpus or config.cpus, limits.cpus)
        memory = env.memory_mb * 1024 * 1024 if env.memory_mb else parse_bytes(config.memory)
        labels = engines.trial_labels(self.sandbox.suite.id, self.trial_id, self.token)
        mounts = [Mount(config.clis_root, str(default_clis_root()), type="bind", read_only=True)] \
            if self.mount_clis else []
        service = client.services.create(
            image, command=KEEPALIVE, name=f"agentmeter-t{self.trial_id}-{self.token[:8]}", labels=labels,
            container_labels=labels, init=True, user="0:0", workdir=contract.workdir, mounts=mounts,
            # Limits, not reservations: Harbor's cpus and memory_mb are ceilings (docker --cpus, --memory).
            resources=service_limits(Resources(cpu_limit=int(cpus * 1e9), mem_limit=memory), config.pids),
            **confined(task),
            mode=ServiceMode("replicated", replicas=1), restart_policy=RestartPolicy("none"),
            constraints=self._constraints(network is not None),
            networks=[network] if network else job_networks(config.network, getattr(self.sandbox, "walled", None)),
            stop_grace_period=int(config.stop_grace * 1e9))
        self.service_id = service.id
        pinned(image, service.attrs.get("Spec") or {})

    def _wait_running(self) -> str:
        """Blocking: the id of the service's container once Swarm reports it running (and its
        node in ``node_id``); ConnectionError when the node Swarm chose is lost meanwhile."""
        api = self.manager.client.api
        started, placements = time.monotonic(), 1
        while True:
            tasks = api.tasks(filters={"service": self.service_id})
            for found in tasks:
                status = found["Status"]
                self.node_id = found.get("NodeID") or self.node_id
                if self.node_id and (lost := self.sandbox.nodes.lost(self.manager.client, self.node_id)):
                    self.slot.node = lost.name  # the attempt lost there is recorded there
                    raise ConnectionError(f"swarm node {lost.name} lost (state {lost.state}) before the trial started")
                container = (status.get("ContainerStatus") or {}).get("ContainerID")
                if status["State"] == "running" and container:
                    return container
                if stale_network(status) and placements < PLACEMENTS:
                    placements += 1
                    self._place_again()
                    break
                if status["State"] in TERMINAL:
                    raise engines.EngineError(f"the trial's swarm service did not start ({status['State']}): "
                                              f"{status.get('Err') or status.get('Message')}")
            if time.monotonic() - started > self.config.start_timeout:
                raise engines.EngineError(f"the trial's swarm service did not start in {self.config.start_timeout:g} s "
                                          f"(state: {', '.join(t['Status']['State'] for t in tasks) or 'no task'})")
            time.sleep(0.05)

    def _place_again(self) -> None:
        """Blocking: the trial's node rejected its service for a stale network (it never ran):
        shun that node, drop the service and make it again elsewhere."""
        if self.node_id and (note := self.sandbox.nodes.shun(self.manager.client, self.node_id)):
            self.notes.append(note)
        self._remove_service()
        self.node_id = None
        self._create_service(*self._spec)

    def _gateway(self, network: str) -> tuple[str, str]:
        """Blocking: this node's address on the closed network, as the container sees it, and
        the network's bridge interface (``br-`` and the first 12 characters of its id)."""
        attrs = self.engine.client.api.inspect_container(self.container)  # on the manager's node
        joined = (attrs["NetworkSettings"].get("Networks") or {}).get(network) or {}
        if not joined.get("Gateway") or not joined.get("NetworkID"):
            raise engines.EngineError(f"the trial's container has no gateway on {network}: the model relay "
                                      f"cannot be reached")
        return joined["Gateway"], f"br-{joined['NetworkID'][:12]}"

    async def cleanup(self, keep: bool = False) -> None:
        if keep:
            await self.keep_workspace()
        await self.manager.call(self._remove_service)
        try:
            await self.remove_container()
            await self.engine.call(self._wait_gone)
        except self.gone_errors():
            if not self.remote:
                raise
            # The worker is gone: the manager has removed the service, and the node drops its
            # container as it comes back (what Swarm does with a removed service's task).

    @staticmethod
    def gone_errors() -> tuple[type[BaseException], ...]:
        """What removing a trial's container raises when its node (engine or link) is gone."""
        return (*engines.engine_errors(), ConnectionError)

    def _remove_service(self) -> None:
        if self.service_id is not None:
            try:
                self.manager.client.api.remove_service(self.service_id)
            except engines.engine_errors() as exc:
                if "not found" not in str(exc):
                    raise

    def _wait_gone(self, timeout: float = 10.0) -> None:
        """Swarm removes a removed service's container on its own too; wait (bounded) until no
        container of the trial is left on this node, so the run leaves nothing behind."""
        selector = {"label": f"{engines.TRIAL}={self.token}"}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                left: list[Any] = self.engine.client.api.containers(all=True, filters=selector)
            except engines.engine_errors():
                return
            if not left:
                return
            for container in left:
                try:
                    self.engine.client.api.remove_container(container["Id"], force=True, v=True)
                except engines.engine_errors():
                    pass  # Swarm is removing it: look again
            time.sleep(0.1)


__all__ = ["SwarmHarborSession"]
