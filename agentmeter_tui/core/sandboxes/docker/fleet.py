"""A Swarm of several nodes as the swarm sandbox sees it (docs/fleet.md): which node each job
runs on, which nodes are lost (a job on a lost node ends infra-invalid and its trial reruns on
the others), and task images published once to the fleet's registry, so every node pulls the
one image the manager built instead of needing its own.

Swarm keeps a task on a node that stopped answering in state ``running`` (for a day, until it
is orphaned) and never reschedules a replica whose restart policy is ``none``; so a job's
watcher asks the node's state itself: one read of the node list per ``period`` for all jobs.

A node that crashed or lost its link while it ran tasks on a swarm-scope network keeps a stale
local copy of that network when it comes back, and rejects every later task on it with
"network ID exists" (moby/moby#37087, #38318; Docker 28 does so still): the watch remembers
such a node as shunned, and later jobs are placed elsewhere (``avoid``); the rejected attempt
itself ends infra-invalid and is tried again (it never ran: it cost no token).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from . import engine as engines
from .images import ImageError

STALE_NETWORK = re.compile(r"\bnetwork \S+ exists\b")
# A Harbor trial's service rejected for a stale network, before anything ran in it, is made again
# on another node, this many times in all (a swarm job's attempt ends infra-invalid instead: Job._shun_node).
PLACEMENTS = 3


def stale_network(status: dict[str, Any]) -> bool:
    """Whether a task's status is a rejection for a node's stale copy of a swarm-scope network."""
    said = f"{status.get('Err') or ''} {status.get('Message') or ''}"  # Docker 20.10 puts it in either
    return status.get("State") == "rejected" and bool(STALE_NETWORK.search(said))


@dataclass(frozen=True)
class Node:
    id: str
    name: str
    state: str  # Swarm's: ready, down, unknown, disconnected
    availability: str  # active, pause, drain
    nano_cpus: int = 0  # what the node offers to reservations (Description.Resources)
    memory: int = 0

    @property
    def fleet_state(self) -> str:
        """ready, drain or down: what a fleet view shows (a paused node takes nothing new either)."""
        if self.state != "ready":
            return "down"
        return "ready" if self.availability == "active" else "drain"


class NodeWatch:
    """The fleet's nodes, read from the manager at most once per ``period`` seconds and shared
    by every job's watcher (thread-safe: the watchers run in worker threads)."""

    def __init__(self, period: float = 1.0):
        self.period = period
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self.nodes: dict[str, Node] = {}
        self.seen: dict[str, float] = {}  # node id -> wall time of the last read that found it ready
        self.shunned: dict[str, str] = {}  # node id -> its name: nodes that reject our jobs (a stale network)

    def shun(self, client: Any, node_id: str, why: str = "") -> str | None:
        """Place no more jobs on the node (it rejected one for a stale network, or ``why``); the
        line a transcript gets the first time, None after."""
        name = self.name(client, node_id)
        with self._lock:
            if node_id in self.shunned:
                return None
            self.shunned[node_id] = name
        why = why or ("rejects jobs on our swarm-scope network: a stale local copy left by a crash or a cut "
                      "link (moby/moby#37087)")
        return f"swarm node {name} {why}: no more jobs go there this run"

    def avoid(self) -> list[str]:
        """Placement constraints that keep a new service off the shunned nodes."""
        with self._lock:
            return [f"node.id!={node_id}" for node_id in sorted(self.shunned)]

    def refresh(self, client: Any) -> dict[str, Node]:
        with self._lock:
            if time.monotonic() - self._read_at >= self.period:
                self.nodes = {n["ID"]: _node(n) for n in client.api.nodes()}
                self._read_at = time.monotonic()
                now = time.time()
                self.seen.update((i, now) for i, n in self.nodes.items() if n.state == "ready")
            return self.nodes

    def name(self, client: Any, node_id: str) -> str:
        node = self.nodes.get(node_id) or self.refresh(client).get(node_id)
        if node is None:  # joined since the last read
            self._read_at = float("-inf")
            node = self.refresh(client).get(node_id)
        return node.name if node else node_id[:12]

    def lost(self, client: Any, node_id: str) -> Node | None:
        """The node, when the manager says it is not ready (its engine stopped, its link cut)."""
        try:
            node = self.refresh(client).get(node_id)
        except engines.engine_errors():
            return None  # the manager itself does not answer: the job's watcher sees that on its own
        return node if node is not None and node.state != "ready" else None

    def summary(self, cpus: float, memory: int) -> list[dict[str, Any]]:
        """name, state (ready, drain, down), ``slots`` (jobs reserving ``cpus`` and ``memory``
        bytes it holds at once) and ``seen`` (wall time the manager last said it was ready: its
        heartbeats arrive) of each node, as last read."""
        return [{"name": n.name, "state": n.fleet_state, "seen": self.seen.get(n.id),
                 "slots": min(n.nano_cpus // max(1, int(cpus * 1e9)), n.memory // max(1, memory))}
                for n in sorted(self.nodes.values(), key=lambda n: n.name)]

    def set_availability(self, client: Any, name: str, availability: str) -> Node:
        """``docker node update --availability`` on the node named ``name`` (its hostname): a
        drained node takes no new job, its running ones go on. ValueError for an unknown name."""
        for raw in client.api.nodes():
            node = _node(raw)
            if node.name == name:
                client.api.update_node(node.id, raw["Version"]["Index"], {**raw["Spec"], "Availability": availability})
                with self._lock:
                    self._read_at = float("-inf")  # the next read shows the change
                return node
        raise ValueError(f"no node {name!r} in this swarm")


def _node(raw: dict[str, Any]) -> Node:
    description = raw.get("Description", {})
    resources = description.get("Resources", {})
    return Node(raw["ID"], description.get("Hostname") or raw["ID"][:12], raw.get("Status", {}).get("State", "unknown"),
                raw.get("Spec", {}).get("Availability", "active"), int(resources.get("NanoCPUs") or 0),
                int(resources.get("MemoryBytes") or 0))


def first_task(client: Any, service_id: str) -> dict[str, Any] | None:
    """The service's (one) task as Swarm last reported it; None before it made one."""
    try:
        tasks = client.api.tasks(filters={"service": service_id})
    except engines.engine_errors():
        return None
    return tasks[0] if tasks else None


def split_reference(image: str) -> tuple[str, str]:
    """``repository, tag`` of an image reference (a registry's ``host:port/`` prefix kept whole)."""
    name, _, digest = image.partition("@")
    if digest:
        return name, digest
    head, sep, tail = name.rpartition(":")
    if sep and "/" not in tail:
        return head, tail
    return name, "latest"


class Publisher:
    """Pushes each image the manager has built or loaded to the fleet's registry, once per run,
    and gives the reference every node pulls. A line per image on stderr says what happens
    (the headless output's image progress); pushes of one image wait for each other."""

    def __init__(self, registry: str, say=None):
        self.registry = registry.rstrip("/")
        self.say = say or (lambda text: print(f"agentmeter: {text}", file=sys.stderr, flush=True))
        self._done: dict[str, str] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def publish(self, client: Any, image: str) -> str:
        if image.startswith(self.registry + "/"):
            return image
        with self._guard:
            lock = self._locks.setdefault(image, threading.Lock())
        with lock:
            if image not in self._done:
                self._done[image] = self._push(client, image)
            return self._done[image]

    def _push(self, client: Any, image: str) -> str:
        """Push ``image`` and return it as ``<registry>/<repository>@<digest>``: what a service
        names is the content the runner pushed, which a node verifies as it pulls; a tag in the
        registry (which anyone reaching it could overwrite) is never what a node runs."""
        repository, tag = split_reference(image)
        target = f"{self.registry}/{repository}"
        started = time.monotonic()
        self.say(f"image {image}: pushing to {self.registry}")
        digest = None
        try:
            local = client.images.get(image)
            local.tag(target, tag)
            for line in client.api.push(target, tag=tag, stream=True, decode=True):
                if line.get("error"):
                    raise ImageError(f"pushing image {image} to {self.registry} failed: {line['error']}")
                digest = (line.get("aux") or {}).get("Digest") or digest
            pinned = f"{target}@{digest}"
            if not digest or pinned not in (client.images.get(local.id).attrs.get("RepoDigests") or []):
                raise ImageError(f"pushing image {image} to {self.registry}: the registry's digest {digest} is "
                                 f"not the image the manager has")
        except engines.engine_errors() as exc:
            raise ImageError(f"pushing image {image} to {self.registry} failed: {exc}") from None
        self.say(f"image {image}: pushed as {pinned} in {time.monotonic() - started:.1f} s")
        return pinned


def pinned(reference: str, spec: dict[str, Any]) -> None:
    """Refuse a service whose spec names another image than ``reference`` (a digest pushed by
    this runner): what Swarm will run is checked before the trial's command goes in."""
    image = ((spec.get("TaskTemplate") or {}).get("ContainerSpec") or {}).get("Image")
    if "@sha256:" in reference and image != reference:
        raise ImageError(f"the trial's service runs {image}, not the image pushed ({reference})")


__all__ = ["PLACEMENTS", "Node", "NodeWatch", "Publisher", "pinned", "split_reference", "first_task", "stale_network"]
