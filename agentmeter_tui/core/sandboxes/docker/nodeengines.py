"""The engines of a fleet's nodes, for Harbor trials that run on any node (``swarmharbor.py``).

A Harbor trial's agent and verifier are execs in the trial's one container, and its files go in
and out as tar archives: Docker's exec and archive calls reach only the containers of the engine
they are sent to. So a trial Swarm places on a worker is driven through that worker's own engine,
named in the swarm sandbox's ``node_engines`` (node host name -> engine URL: ``ssh://`` as the
docker CLI reaches a remote engine, or a local socket). Only the manager and the nodes named
there take Harbor trials (the service's placement constraints, ``constraints``); with none named,
Harbor trials stay on the manager's node, as before. docs/fleet.md says why this design.
"""

from __future__ import annotations

import threading
from typing import Any

from . import engine as engines
from .fleet import Node


class NodeEngines:
    """One connection per node, made on first use and shared by the node's trials (thread-safe:
    sessions ask from the engine pool's threads)."""

    def __init__(self, urls: dict[str, str], *, key: str | None = None, known_hosts: str | None = None):
        self.urls, self.key, self.known_hosts = dict(urls), key, known_hosts
        self._engines: dict[str, engines.Engine] = {}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self.urls)

    def constraints(self, manager_id: str | None, nodes: dict[str, Node]) -> list[str] | None:
        """Swarm placement constraints that keep a Harbor trial off nodes whose engine we cannot
        reach: the manager and the named nodes only (Swarm has no ``in``: one ``!=`` per other)."""
        if not self.urls:
            return [f"node.id=={manager_id}"] if manager_id else None
        return [f"node.id!={n.id}" for n in sorted(nodes.values(), key=lambda n: n.name)
                if n.id != manager_id and n.name not in self.urls] or None

    def engine(self, name: str) -> engines.Engine:
        """Blocking: the engine of node ``name`` (EngineError: not named, or not answering)."""
        with self._lock:
            found = self._engines.get(name)
            if found is not None:
                return found
            url = self.urls.get(name)
            if url is None:
                raise engines.EngineError(f"swarm node {name} took a Harbor trial but node_engines names no "
                                          f"engine for it")
            client: Any = engines.connect(url, key=self.key, known_hosts=self.known_hosts, timeout=60)
            found = engines.Engine(f"swarm node {name}", url, client, engines.is_local_url(url))
            self._engines[name] = found
            return found

    def forget(self, name: str) -> None:
        """Drop a node's connection (its engine went away): the next trial there connects anew."""
        with self._lock:
            found = self._engines.pop(name, None)
        if found is not None:
            found.close()

    def close(self) -> None:
        with self._lock:
            found, self._engines = list(self._engines.values()), {}
        for engine in found:
            engine.close()


__all__ = ["NodeEngines"]
