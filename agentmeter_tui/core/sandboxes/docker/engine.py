"""Docker engines: connecting (the local socket, ``DOCKER_HOST``, or ``ssh://`` through the SDK's
SSH transport with our own key and known_hosts), the labels every object we create carries,
and :func:`clean_leftovers`, which removes what a crashed runner left behind.

The docker SDK is synchronous; each engine gets its own thread pool so that slow engine
calls never starve the event loop's default executor (which the local sandbox uses).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ... import cgroups
from ...extras import MissingExtra, require

T = TypeVar("T")

MANAGED = "agentmeter.managed"
RUNNER = "agentmeter.runner"  # "<hostname>:<pid>:<start>" of the runner that made the object (cgroups.started)
TRIAL = "agentmeter.trial"  # the trial's token
TRIAL_ID = "agentmeter.trial-id"
SUITE = "agentmeter.suite"
DIFFTEST = "agentmeter.difftest"  # a differential test side's container or committed image (docker/difftest.py)
API_VERSION = "1.41"  # Docker 20.10, the oldest engine we promise to drive
POOL = 64


def runner_label() -> str:
    # The start tells a live runner from a later process that reused its pid (its owner key).
    return f"{socket.gethostname()}:{cgroups.owner_key().replace('-', ':')}"


def trial_labels(suite_id: str, trial_id: int | None, token: str) -> dict[str, str]:
    return {MANAGED: "1", RUNNER: runner_label(), TRIAL: token, TRIAL_ID: str(trial_id or ""), SUITE: suite_id}


class EngineError(RuntimeError):
    pass


def lost(name: str, exc: BaseException) -> BaseException:
    """``exc`` (the engine did not answer) as an error whose text names the engine: a trial's
    infra-invalid reason reads ``infra: docker engine NAME lost: ...``. Still a requests
    ``ConnectionError``, so whoever catches :func:`engine_errors` still does."""
    import requests

    if str(exc).startswith("docker engine "):
        return exc
    return requests.exceptions.ConnectionError(f"docker engine {name} lost: {exc}")


def engine_errors() -> tuple[type[BaseException], ...]:
    """What a call to an engine raises when the engine refuses or is gone (for ``except``)."""
    try:
        from docker.errors import DockerException
        from requests.exceptions import RequestException
    except ModuleNotFoundError:  # the docker extra is not installed: connect() says so
        return (MissingExtra, OSError)
    return (DockerException, RequestException, OSError, MissingExtra)


def _keyed_ssh_adapter(base_url: str, key: str | None, known_hosts: str | None, timeout: int) -> Any:
    """The SDK's SSH adapter, told which key to use and which known_hosts file to trust.

    The stock adapter reads only ``~/.ssh/config`` and ``~/.ssh/known_hosts``; a suite names
    its own, so the two are added here. Unknown host keys stay refused (RejectPolicy).
    """
    from docker.transport import SSHHTTPAdapter

    class KeyedSSHAdapter(SSHHTTPAdapter):
        def _create_paramiko_client(self, url: str) -> None:
            super()._create_paramiko_client(url)
            if key:
                self.ssh_params.update(key_filename=key, look_for_keys=False, allow_agent=False)
            if known_hosts and os.path.exists(known_hosts):
                self.ssh_client.load_host_keys(known_hosts)

    return KeyedSSHAdapter(base_url, timeout, pool_connections=POOL, max_pool_size=POOL)


def connect(url: str | None = None, *, key: str | None = None, known_hosts: str | None = None,
            timeout: int = 120) -> Any:
    """A ``docker.DockerClient`` for ``url`` (None: the environment's engine). Blocking."""
    docker = require("docker")

    try:
        if url is None:
            client = docker.from_env(timeout=timeout, max_pool_size=POOL, version=API_VERSION)
        elif url.startswith("ssh://"):
            # Built like APIClient does for ssh://, but with our adapter: no connection is made
            # until the adapter exists, because the version is given.
            client = docker.DockerClient(base_url="tcp://127.0.0.1:9", version=API_VERSION, timeout=timeout)
            adapter = _keyed_ssh_adapter(url, key, known_hosts, timeout)
            client.api._custom_adapter = adapter
            client.api.mount("http+docker://ssh", adapter)
            client.api.base_url = "http+docker://ssh"
        else:
            client = docker.DockerClient(base_url=url, version=API_VERSION, timeout=timeout, max_pool_size=POOL)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - the SDK, requests and paramiko each raise their own
        raise EngineError(describe_failure(url, exc, known_hosts)) from None
    return client


def describe_failure(url: str | None, exc: BaseException, known_hosts: str | None = None) -> str:
    where = url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    text = str(exc)
    if "not found in known_hosts" in text:
        option = f" --known-hosts {known_hosts}" if known_hosts else ""
        return (f"docker engine {where}: the SSH host key is not in known_hosts; check its fingerprint and "
                f"accept it once with `agentmeter hosts accept {where}{option}`")
    if "Authentication failed" in text:
        return f"docker engine {where}: SSH authentication failed (check the user and key)"
    if isinstance(exc, FileNotFoundError) or "No such file" in text or "Connection refused" in text:
        return f"docker engine {where} is not answering (is dockerd running?): {text}"
    return f"docker engine {where} is not usable: {text}"


@dataclass
class Engine:
    """One connected engine: its client, its thread pool, and what it said about itself."""

    name: str
    url: str | None
    client: Any
    local: bool  # bind mounts and this machine's files are visible to it
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(32, "docker"))
    info: dict[str, Any] = field(default_factory=dict)
    closed: bool = False  # close() ran: calls still waiting for a thread were cancelled (call says so)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` on the engine's pool. A connection that fails (dockerd stopped or restarting,
        a remote engine out of reach) raises :func:`lost`'s error, which names the engine."""
        import requests

        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.executor, lambda: fn(*args, **kwargs))
        except requests.exceptions.ConnectionError as exc:
            named = lost(self.name, exc)
            if named is exc:
                raise
            raise named from exc
        except RuntimeError as exc:  # submitted after close(): the pool refuses new calls
            if not self.closed:
                raise
            raise lost(self.name, ConnectionError("its connection was closed")) from exc
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self.closed or (task is not None and task.cancelling()):
                raise  # the caller's own task was cancelled: a real cancellation
            # close() cancelled the call while it waited for a thread (another trial on this node
            # lost the engine): an engine error, never a cancellation that ends the trial unrecorded
            raise lost(self.name, ConnectionError("its connection was closed under the call")) from None

    def close(self) -> None:
        self.closed = True
        self.executor.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(*engine_errors()):
            self.client.close()


def is_local_url(url: str | None) -> bool:
    if url is None:
        url = os.environ.get("DOCKER_HOST")
    return url is None or url.startswith(("unix://", "npipe://", "tcp://127.0.0.1", "tcp://localhost"))


# -- leftovers ----------------------------------------------------------------------------------


@dataclass
class CleanReport:
    containers: list[str] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    configs: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # differential sides' committed images only
    in_use: list[str] = field(default_factory=list)  # networks a dead runner made that others still use
    errors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return (len(self.containers) + len(self.services) + len(self.volumes) + len(self.networks)
                + len(self.configs) + len(self.images))


def _orphaned(labels: dict[str, str] | None, include_live: bool) -> bool:
    """Made by a runner that no longer runs (or by any runner, with ``include_live``)."""
    labels = labels or {}
    if labels.get(MANAGED) != "1":
        return False
    if include_live:
        return True
    host, pid, started = (labels.get(RUNNER, "").split(":") + ["", "", ""])[:3]
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's runner: not ours to judge
    return not cgroups.owner_alive(f"{pid}-{started}")  # the same judge as the runner's groups and folders


def clean_leftovers(url: str | None = None, *, dry_run: bool = False, include_live: bool = False,
                    client: Any = None, suite_id: str | None = None) -> CleanReport:
    """Remove containers, swarm services and configs, volumes, networks and differential sides'
    images labelled ``agentmeter.managed`` whose runner is gone (``agentmeter doctor --clean``;
    with ``suite_id``, only that suite's trial objects: what a run's restart removes). Blocking."""
    client = client or connect(url)
    report = CleanReport()
    selector = {"label": [MANAGED, f"{SUITE}={suite_id}"] if suite_id else MANAGED}
    swarm = (client.info().get("Swarm") or {}).get("ControlAvailable", False)
    groups: list[tuple[str, Callable[[], list], Callable[[Any], None]]] = [
        ("services", lambda: client.services.list(filters=selector) if swarm else [], lambda o: o.remove()),
        ("containers", lambda: client.containers.list(all=True, filters=selector),
         lambda o: o.remove(force=True, v=True)),
        ("configs", lambda: client.configs.list(filters=selector) if swarm else [], lambda o: o.remove()),
        ("volumes", lambda: client.volumes.list(filters=selector), lambda o: o.remove(force=True)),
        ("networks", lambda: client.networks.list(filters=selector), lambda o: o.remove()),
        # Other images are caches and stay; a side's snapshot is made for one evaluation.
        ("images", lambda: [] if suite_id else client.images.list(filters={"label": DIFFTEST}),
         lambda o: client.images.remove(o.id, force=True)),
    ]
    for kind, lister, remover in groups:
        try:
            objects = lister()
        except engine_errors() as exc:
            report.errors.append(f"listing {kind}: {exc}")
            continue
        for obj in objects:
            labels = obj.attrs.get("Labels") or (obj.attrs.get("Spec") or {}).get("Labels") or \
                (obj.attrs.get("Config") or {}).get("Labels")
            if not _orphaned(labels, include_live):
                continue
            name = getattr(obj, "name", None) or (getattr(obj, "tags", None) or [obj.id])[0]
            getattr(report, kind).append(name)
            if dry_run:
                continue
            try:
                remover(obj)
            except engine_errors() as exc:
                if kind == "networks" and "active endpoints" in str(exc):
                    # The isolated network is shared by every runner on the engine and labelled
                    # with the one that made it: that runner's death does not free it.
                    report.networks.remove(name)
                    report.in_use.append(name)
                    continue
                report.errors.append(f"removing {kind[:-1]} {name}: {exc}")
    return report
