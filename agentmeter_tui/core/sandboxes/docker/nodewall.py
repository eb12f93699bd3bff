"""The walled network of swarm jobs, and the wall each node puts around it.

A swarm job (``swarmjob.py``) ran on its node's host network: it reached the fleet's
registry, the other trials and whatever listens on the node or the runner's machine. Now a
job joins :data:`WALLED_NETWORK`, an internal bridge network of swarm scope (one bridge per
node, ``br-`` and the first 12 characters of the network's id, the same name on every
node). Docker's own rules do not wall such a bridge off from its node (packets to the
node's addresses are *input*, not forwarded; a node whose engine runs without iptables has
no rules at all), and nothing on a remote node is the runner's to filter. So the runner
deploys, per model route, a **wall**: a global service (one task on every node, host
network, root with NET_ADMIN and NET_RAW only, image :data:`~.images.WALL_IMAGE` made of
this machine's python and iptables) that, in its node's own network namespace,

- puts the bridge's INPUT behind chain :data:`CHAIN`: ACCEPT to the route's port on
  :data:`ADDRESS` (a link-local address it adds to the node's ``lo``, so every node's jobs
  name the same URL), DROP the rest; the bridge's FORWARD (out of it, into it, and between
  its ports when ``br_netfilter`` passes bridged frames to iptables) is dropped, IPv6 too, in
  DOCKER-USER where the engine has one (its own ACCEPTs for a bridge go above anything else
  in FORWARD each time it makes the bridge);
- relays what arrives at ``ADDRESS:port`` to the route's target: the model server or
  metering proxy on the runner's loopback (a local engine), or the runner's relay on
  ``relay_address`` (a fleet).

A job's one reachable place is that relay. The suite opts out with ``network = "host"``
(the node's host network, as before; each transcript says so) or names another network.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any

from . import engine as engines
from .images import WALL_IMAGE, ensure_host_image

if TYPE_CHECKING:
    from .fleet import NodeWatch

WALLED_NETWORK = "agentmeter-walled-swarm"
WALLED = "walled"  # the swarm sandbox's default ``network``
ADDRESS = "169.254.213.1"  # the walls' relays on every node (link-local: never routed off the node)
CHAIN = "AGENTMETER-WALLED"
# Seconds the other nodes' walls get once one is up: a node whose wall never says so (its task
# stuck after a cut link) is shunned rather than failing every trial of the run.
STRAGGLE = 20.0
# Run in the wall's container as ``python3 -c WALL_SCRIPT <json>``: rules first, then the relay;
# on SIGTERM (the service removed) its own ACCEPT rule goes (the chain's DROP stays).
WALL_SCRIPT = r"""
import asyncio, json, os, signal, subprocess, sys
cfg = json.loads(sys.argv[1])
bridge, chain, address, port = cfg["bridge"], cfg["chain"], cfg["address"], cfg["port"]
def ipt(tool, *args):
    return subprocess.run([tool, "-w", *args], capture_output=True, text=True)
def ensure(tool, *rule, insert=True):
    if ipt(tool, "-C", *rule).returncode:
        done = ipt(tool, "-I" if insert else "-A", *rule)
        if done.returncode:
            sys.exit(f"WALL-FAILED {tool} {' '.join(rule)}: {done.stderr.strip()}")
accept = [chain, "-d", address, "-i", bridge, "-p", "tcp", "--dport", str(port), "-m", "comment",
          "--comment", cfg["name"], "-j", "ACCEPT"]
subprocess.run(["ip", "addr", "add", address + "/32", "dev", "lo"], capture_output=True)
ipt("iptables", "-N", chain)
ensure("iptables", chain, "-j", "DROP", insert=False)
ensure("iptables", *accept)
ensure("iptables", "INPUT", "-i", bridge, "-j", chain)
# An engine with iptables puts FORWARD ACCEPTs for a bridge above ours each time it makes the
# bridge (a container's arrival); DOCKER-USER is the chain it jumps to first and never edits.
def forward(tool):
    return "DOCKER-USER" if ipt(tool, "-S", "DOCKER-USER").returncode == 0 else "FORWARD"
for way in ("-i", "-o"):
    ensure("iptables", forward("iptables"), way, bridge, "-j", "DROP")
for rule in (["INPUT", "-i", bridge, "-j", "DROP"], [forward("ip6tables"), "-i", bridge, "-j", "DROP"],
             [forward("ip6tables"), "-o", bridge, "-j", "DROP"]):
    if ipt("ip6tables", "-C", *rule).returncode:
        ipt("ip6tables", "-I", *rule)
try:
    peers = open("/proc/sys/net/bridge/bridge-nf-call-iptables").read().strip() == "1"
except OSError:
    peers = False
async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()
async def handle(reader, writer):
    try:
        up_reader, up_writer = await asyncio.open_connection(cfg["host"], cfg["target"])
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
async def main():
    try:
        server = await asyncio.start_server(handle, address, port, reuse_address=True)
    except OSError as exc:  # the port is another runner's relay on this node (a fleet shared by two machines)
        ipt("iptables", "-D", *accept)
        sys.exit(f"WALL-FAILED cannot listen on {address}:{port}: {exc}")
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print("WALL-READY", os.environ.get("NODE", "?"), "peers" if peers else "peers-open", flush=True)
    await stop.wait()
    server.close()
    ipt("iptables", "-D", *accept)
asyncio.run(main())
"""


def walled_network(client: Any) -> tuple[str, str]:
    """Blocking: the walled network (made on first use, by whichever runner comes first, and
    kept) and the name of its bridge on every node. One of that name that is not internal
    (a stranger's) is refused."""
    from docker.errors import APIError, NotFound

    try:
        attrs = client.api.inspect_network(WALLED_NETWORK)
    except NotFound:
        try:
            client.networks.create(WALLED_NETWORK, driver="bridge", scope="swarm", internal=True,
                                   check_duplicate=True,
                                   labels={engines.MANAGED: "1", engines.RUNNER: engines.runner_label()})
        except APIError as exc:  # another runner made it meanwhile
            if exc.status_code != 409 and "already exists" not in str(exc):
                raise
        attrs = client.api.inspect_network(WALLED_NETWORK)
    if not attrs.get("Internal") or attrs.get("Scope") != "swarm":
        raise engines.EngineError(f"docker network {WALLED_NETWORK} is not an internal network of swarm scope; "
                                  f"remove it (docker network rm {WALLED_NETWORK}) and the next run makes it walled")
    return WALLED_NETWORK, f"br-{attrs['Id'][:12]}"


def job_networks(network: str, walled: str | None) -> list[str] | None:
    """A job's service's networks for the suite's ``network``: the walled one (``walled``, its
    name), the node's host network (``host``, said by the suite), or the one the suite names."""
    if network == WALLED:
        return [walled] if walled else None
    return [network] if network != "bridge" else None


def host_network_note(network: str) -> str | None:
    """The transcript's line for a job the suite put outside the walled network."""
    if network == WALLED:
        return None
    where = "the node's host network" if network == "host" else f"network {network!r}"
    return (f"warning: the suite's [sandbox] network = {network!r}: this swarm job runs on {where}, not walled: "
            f"it reaches what that network reaches (the fleet's registry, other trials, the node's and this "
            f"machine's addresses)")


class NodeWalls:
    """One wall service per route (a target the runner's model calls go to), made on first use
    and removed with the sandbox; blocking methods, thread-safe."""

    def __init__(self, suite_id: str, start_timeout: float, nodes: NodeWatch, publish: Any = None):
        self.suite_id, self.start_timeout, self.nodes = suite_id, start_timeout, nodes
        self.publish = publish or (lambda client, image: image)
        self.lock = threading.Lock()
        self.image: str | None = None
        self.services: dict[tuple[str, int], str] = {}  # target -> service id
        self.notes: list[str] = []  # what a wall said of its node (peers not filtered)

    def prepare(self, client: Any) -> str:
        """The wall's image as the nodes name it (built on the manager, pushed on a fleet)."""
        if self.image is None:
            self.image = self.publish(client, ensure_host_image(client, WALL_IMAGE))
        return self.image

    def route(self, client: Any, bridge: str, target: tuple[str, int]) -> tuple[str, int]:
        """The address and port jobs on the walled network reach ``target`` at, once the wall
        of that route is up on every ready node."""
        with self.lock:
            if target not in self.services:
                self.services[target] = self._create(client, bridge, target)
                self._wait_ready(client, self.services[target], target)
        return ADDRESS, target[1]

    def _create(self, client: Any, bridge: str, target: tuple[str, int]) -> str:
        from docker.types import Resources, RestartPolicy, ServiceMode

        tag = secrets.token_hex(5)  # two sandboxes of one runner may route to the same target
        name = f"agentmeter-wall-{tag}"
        labels = engines.trial_labels(self.suite_id, None, f"wall-{tag}")
        settings = {"bridge": bridge, "chain": CHAIN, "address": ADDRESS, "port": target[1], "host": target[0],
                    "target": target[1], "name": f"agentmeter {name}"}
        service = client.services.create(
            self.prepare(client), command=["python3", "-c", WALL_SCRIPT, json.dumps(settings)], name=name,
            labels=labels, container_labels=labels, user="0:0", networks=["host"], env=["NODE={{.Node.ID}}"],
            cap_drop=["ALL"], cap_add=["NET_ADMIN", "NET_RAW"], mode=ServiceMode("global"),
            restart_policy=RestartPolicy("on-failure", delay=1_000_000_000),
            resources=Resources(cpu_limit=int(0.25e9), mem_limit=64 << 20), stop_grace_period=2_000_000_000)
        return service.id

    def _wait_ready(self, client: Any, service_id: str, target: tuple[str, int]) -> None:
        """Until each ready, active node's task of the wall said its rules are in and it listens."""
        deadline = time.monotonic() + self.start_timeout
        first_ready: float | None = None  # when the first node's wall said it is up
        while True:
            nodes = {n["ID"] for n in client.api.nodes()
                     if n["Status"]["State"] == "ready" and n["Spec"].get("Availability") == "active"}
            said = client.api.service_logs(service_id, stdout=True, stderr=True, follow=False)
            said = said if isinstance(said, bytes) else b"".join(said)
            lines = [line.split() for line in said.decode(errors="replace").splitlines()]
            ready = {words[words.index("WALL-READY") + 1]: words[-1] for words in lines if "WALL-READY" in words}
            if failed := [" ".join(w) for w in lines if "WALL-FAILED" in w]:
                raise engines.EngineError(f"the swarm nodes' wall could not be put up: {failed[0]}")
            first_ready = first_ready or (time.monotonic() if ready else None)
            straggling = first_ready is not None and time.monotonic() - first_ready > STRAGGLE
            if nodes <= set(ready) or straggling:
                if any(state == "peers-open" for state in ready.values()):
                    self.notes.append("a swarm node passes no bridged frames to iptables (br_netfilter off): jobs "
                                      "on the same node of the walled network can reach each other")
                for node_id in sorted(nodes - set(ready)):  # a job there could not reach its model
                    if note := self.nodes.shun(client, node_id, f"has no wall up for the model's route after "
                                                                 f"{STRAGGLE:g} s"):
                        self.notes.append(note)
                return
            if time.monotonic() > deadline:
                raise engines.EngineError(f"the swarm nodes' wall for {target[0]}:{target[1]} did not start on every "
                                          f"node in {self.start_timeout:g} s ({len(ready)}/{len(nodes)} ready)")
            time.sleep(0.1)

    def close(self, client: Any) -> None:
        with self.lock:
            for service_id in self.services.values():
                try:
                    client.api.remove_service(service_id)
                except engines.engine_errors():
                    pass  # removed already (the sweep)
            self.services.clear()


__all__ = ["ADDRESS", "WALLED", "WALLED_NETWORK", "NodeWalls", "host_network_note", "job_networks",
           "walled_network"]
