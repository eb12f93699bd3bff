"""The host's side of the isolated network's wall: what Docker's internal network leaves open.

An ``internal`` bridge network drops traffic Docker would *forward* out of it, and with
``enable_icc = false`` traffic between its containers; packets a container sends to the host
itself (the bridge's gateway, docker0, any other address of this machine: a registry's port,
Swarm's, whatever listens on 0.0.0.0) are *input* to the host and pass. So the runner, as
root, puts the isolated network's bridge interface (a name we give it, :data:`BRIDGE`) behind
a chain of its own in the INPUT chain: ACCEPT to each relay's port on the gateway (added as
the relay is made, removed when the runner closes), DROP for the rest; in IPv6 (link-local
addresses need no configuration) everything is dropped. The chain and the jump stay (they
name an interface that is ours alone); a runner's ACCEPT rules carry its runner label in a
comment, by which the next runner removes those of runners that are gone (killed before they
closed).

Without root (or without ``iptables``) no rule can be installed: each trial's transcript
then says that the host's addresses are reachable from its container.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import threading
from typing import Any

from ... import cgroups
from . import engine as engines
from .containers import ISOLATED_NETWORK

BRIDGE = "am-isolated"  # the isolated network's bridge interface (15 characters at most)
CHAIN = "AGENTMETER-ISOLATED"
CLOSED_CHAIN = "AGENTMETER-CLOSED"  # the swarm-scope bridges of closed Harbor trials (``swarmharbor.py``)
OPTIONS = {"com.docker.network.bridge.enable_icc": "false", "com.docker.network.bridge.name": BRIDGE}


def isolated_network(client: Any) -> Any:
    """Blocking: the isolated network, made on first use (by whichever runner comes first) and
    kept; one whose options are not ours (a stranger's of the same name) is refused."""
    from docker.errors import APIError, NotFound

    try:
        network = client.networks.get(ISOLATED_NETWORK)
    except NotFound:
        try:
            network = client.networks.create(ISOLATED_NETWORK, driver="bridge", internal=True, options=OPTIONS,
                                             check_duplicate=True, labels={engines.MANAGED: "1",
                                                                           engines.RUNNER: engines.runner_label()})
        except APIError as exc:  # another runner made it meanwhile
            if exc.status_code != 409 and "already exists" not in str(exc):
                raise
            network = client.networks.get(ISOLATED_NETWORK)
    options = network.attrs.get("Options") or {}
    if not network.attrs.get("Internal") or any(options.get(k) != v for k, v in OPTIONS.items()):
        raise engines.EngineError(f"docker network {ISOLATED_NETWORK} is not internal or lets its containers "
                                  f"reach each other (options {options}); remove it (docker network rm "
                                  f"{ISOLATED_NETWORK}) and the next run makes it walled")
    return network


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([tool, "-w", *args], capture_output=True, text=True, timeout=30)


class HostWall:
    """The INPUT filter of one bridge (default :data:`BRIDGE`) on this machine, for one runner's
    relays; with ``peers``, traffic between the bridge's containers is dropped too (a network
    Docker gives no ``enable_icc`` option: the swarm-scope bridge of closed Harbor trials)."""

    def __init__(self, bridge: str = BRIDGE, chain: str = CHAIN, peers: bool = False) -> None:
        self.bridge, self.chain, self.peers = bridge, chain, peers
        self.allowed: list[tuple[str, int]] = []
        self.ready = False
        self.lock = threading.Lock()
        self.problem = self._unavailable()

    @staticmethod
    def _unavailable() -> str | None:
        if os.geteuid() != 0:
            return "the runner is not root, so it cannot filter packets to this machine"
        if shutil.which("iptables") is None:
            return "iptables is not installed"
        return None

    def note(self) -> str | None:
        """A line for each trial's transcript when the host is not walled off."""
        if self.problem is None:
            return None
        return (f"the isolated network does not wall off this machine's own addresses ({self.problem}): "
                f"the agent's container can reach what listens on them")

    def _chain(self, tool: str, final: list[str]) -> None:
        """The chain (made once, by whichever runner comes first) and INPUT's jump to it."""
        made = _run(tool, "-N", self.chain)
        if made.returncode and "exists" not in made.stderr:
            raise engines.EngineError(f"{tool} -N {self.chain}: {made.stderr.strip()}")
        if _run(tool, "-C", self.chain, *final).returncode:
            _run(tool, "-A", self.chain, *final)
        rules = [["INPUT", "-i", self.bridge, "-j", self.chain]]
        if self.peers:
            # In DOCKER-USER: the engine puts its ACCEPT between a bridge's ports above anything
            # else in FORWARD each time it makes the bridge again (after its last container left).
            forward = "DOCKER-USER" if _run(tool, "-S", "DOCKER-USER").returncode == 0 else "FORWARD"
            rules.append([forward, "-i", self.bridge, "-o", self.bridge, "-j", "DROP"])
        for rule in rules:
            if _run(tool, "-C", *rule).returncode:
                added = _run(tool, "-I", *rule)
                if added.returncode:
                    raise engines.EngineError(f"{tool} -I {' '.join(rule)}: {added.stderr.strip()}")

    def _sweep(self) -> None:
        """The ACCEPT rules of this machine's runners that are gone (killed before they closed)."""
        listed = _run("iptables", "-S", self.chain)
        for line in listed.stdout.splitlines():
            rule = shlex.split(line)
            label = rule[rule.index("--comment") + 1] if "--comment" in rule else ""
            host, _, owner = label.removeprefix("agentmeter ").partition(":")
            if rule[:1] == ["-A"] and host == socket.gethostname() and owner.count(":") == 1 and \
                    not cgroups.owner_alive(owner.replace(":", "-")):
                _run("iptables", "-D", *rule[1:])

    def _ensure(self) -> None:
        if self.ready:
            return
        self._chain("iptables", ["-j", "DROP"])
        self._sweep()
        if shutil.which("ip6tables"):
            self._chain("ip6tables", ["-j", "DROP"])
        self.ready = True

    def _accept(self, gateway: str, port: int) -> list[str]:
        return [self.chain, "-d", gateway, "-p", "tcp", "--dport", str(port), "-m", "comment", "--comment",
                f"agentmeter {engines.runner_label()}", "-j", "ACCEPT"]

    def allow(self, gateway: str, port: int) -> None:
        """Blocking: containers on the isolated network may connect to ``gateway:port`` (a relay)."""
        if self.problem is not None or ":" in gateway:
            return
        with self.lock:
            if (gateway, port) in self.allowed:
                return
            self._ensure()
            added = _run("iptables", "-I", *self._accept(gateway, port))
            if added.returncode:
                raise engines.EngineError(f"iptables: the relay's rule was refused: {added.stderr.strip()}")
            self.allowed.append((gateway, port))

    def close(self) -> None:
        """Blocking: this runner's ACCEPT rules removed (the chain's DROP stays)."""
        with self.lock:
            for gateway, port in self.allowed:
                _run("iptables", "-D", *self._accept(gateway, port))
            self.allowed.clear()
