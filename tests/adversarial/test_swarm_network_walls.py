"""Swarm jobs on the 3-node fleet try to reach what they must not (issue 37, items 9 and 10): the
fleet registry's HTTP API, another trial's job, and listeners on this machine's and the nodes'
addresses (a listener the test opens in each node's network namespace, Swarm's port). Only the
model relay may answer. Today a job runs on its node's host network and reaches all of them;
on the walled network (``nodewall.py``) every one is refused, and a whole run's model calls
are still metered."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import subprocess
import sys

import pytest

from agentmeter_tui.core.sandboxes.base import KillPolicy, LaunchSpec
from agentmeter_tui.core.sandboxes.docker.swarm import SwarmSandbox
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.load import load_suite
from tests.conftest import agentmeter
from tests.core.fleet_support import fleet_down, fleet_up
from tests.core.sandbox_support import SMOKE, assert_smoke_verdicts, suite_copy, unique_id

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.xdist_group("fleet-walls")]

FLEET_ENV = {"FLEET_NAME": "amw", "FLEET_NET": "10.213.91", "FLEET_DIR": "/tmp/agentmeter-fleet-walls"}
PEER_PORT, NODE_PORT = 7017, 7018
# Every probe at once (threads): an address behind the wall is a connect that never completes.
PROBE = r"""
import concurrent.futures, json, socket, sys, urllib.request
targets = json.loads(sys.argv[1])
for f in (l.split() for l in open("/proc/net/route").readlines()[1:]):
    if f[1] == "00000000":  # the default route's gateway (a node's host network has none)
        gateway = ".".join(str(b) for b in reversed(bytes.fromhex(f[2])))
        targets.append(["node gateway", gateway, int(sys.argv[2])])
def probe(target):
    name, host, port = target
    if name == "registry api":
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/v2/_catalog", timeout=4) as answer:
                return name, "reached " + answer.read(200).decode(errors="replace")
        except Exception as exc:
            return name, type(exc).__name__
    s = socket.socket()
    s.settimeout(4)
    try:
        s.connect((host, port))
        return name, "reached"
    except OSError as exc:
        return name, type(exc).__name__
    finally:
        s.close()
with concurrent.futures.ThreadPoolExecutor(64) as pool:
    found = dict(pool.map(probe, targets))
print("RESULT " + json.dumps(found), flush=True)
"""
# Another trial: listens, and says its addresses (those of its network namespace).
LISTEN = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', {PEER_PORT})); s.listen(64)
lines = open('/proc/net/fib_trie').read().splitlines()
mine = sorted({{lines[i - 1].split()[-1] for i, l in enumerate(lines) if '/32 host LOCAL' in l}})
print('LISTENING ' + ' '.join(a for a in mine if not a.startswith('127.')), flush=True)
while True: s.accept()[0].close()
"""
NODE_LISTENER = (f"import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                 f"s.bind(('0.0.0.0', {NODE_PORT})); s.listen(64)\nwhile True: s.accept()[0].close()")


@pytest.fixture(scope="module")
def fleet():
    fleet = fleet_up(3, **FLEET_ENV)
    yield fleet
    fleet_down(fleet)


@pytest.fixture
def node_listeners(fleet):
    """A listener on 0.0.0.0 in each node's network namespace (what a node's own service is)."""
    procs = [subprocess.Popen(["ip", "netns", "exec", fleet.node(i), sys.executable, "-c", NODE_LISTENER])
             for i in (1, 2, 3)]
    yield
    for proc in procs:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def _only_on(fleet, node: str | None):
    """Every node but ``node`` drained (new jobs go there alone) while the block runs."""
    client = fleet.client()
    others = [n for n in client.nodes.list() if node and n.attrs["Description"]["Hostname"] != node]
    try:
        for other in others:
            other.update({**other.attrs["Spec"], "Availability": "drain"})
        yield
    finally:
        for other in others:
            other.reload()
            other.update({**other.attrs["Spec"], "Availability": "active"})
        client.close()


async def _answering(host: str) -> asyncio.AbstractServer:
    async def answer(reader, writer):
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nmodel")
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, host, 0)


async def _listening(session) -> list[str]:
    """Another trial's job that listens; returns its addresses once it does."""
    said: asyncio.Future = asyncio.get_running_loop().create_future()

    def seen(stream, batch):
        for line in batch:
            if line.startswith(b"LISTENING") and not said.done():
                said.set_result(line.decode().split()[1:])

    await session.start(LaunchSpec(["python3", "-c", LISTEN], {}), seen)
    return await said


async def _open_walled(sandbox, task, sessions: list, count: int, tag: str, model) -> tuple[str, int]:
    """``count`` trials' sessions on the walled network, appended to ``sessions`` as each opens
    (the caller's cleanup sees every one), and the relay address the first one reaches ``model``
    (a server on this machine's loopback) at."""
    await sandbox.preflight()
    for n in range(count):
        sessions.append(await sandbox.open(task, n + 1, f"{tag}{n}{unique_id('t')[-6:]}".ljust(16, "0")))
    relay = sessions[0].translate_url(f"http://127.0.0.1:{model.sockets[0].getsockname()[1]}/v1")
    relay = await relay if inspect.isawaitable(relay) else relay
    relay_host, relay_port = relay.split("//")[1].split("/")[0].split(":")
    return relay_host, int(relay_port)


async def _probe(session, targets: list[list], node_port: int) -> dict[str, str]:
    await session.write_files("scratch", {"probe.py": PROBE.encode()})
    lines: list[bytes] = []
    agent = await session.start(LaunchSpec(["python3", f"{session.scratch}/probe.py", json.dumps(targets),
                                            str(node_port)], {}), lambda stream, batch: lines.extend(batch))
    assert await agent.wait() == 0, b"\n".join(lines).decode()
    result = next(line for line in lines if line.startswith(b"RESULT "))
    return json.loads(result[7:])


async def test_fleet_jobs_reach_their_relay_and_nothing_else(tmp_path, fleet, node_listeners):
    folder = suite_copy(SMOKE, tmp_path / "suite", fleet.sandbox(), suite_id=unique_id("swarm-walls"))
    suite = load_suite(folder)
    sandbox = SwarmSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    model, host = await _answering("127.0.0.1"), await _answering("0.0.0.0")
    sessions: list = []
    try:
        relay_host, relay_port = await _open_walled(sandbox, suite.task("count-lines"), sessions, 3, "swwall", model)
        peers = await _listening(sessions[2])
        registry_host, registry_port = fleet.registry.split(":")
        host_port = host.sockets[0].getsockname()[1]
        targets = [["relay", relay_host, int(relay_port)], ["registry api", registry_host, int(registry_port)],
                   ["host listener", fleet.bridge_address, host_port]]
        targets += [[f"other trial at {address}", address, PEER_PORT] for address in peers]
        for i in (1, 2, 3):
            node = f"{fleet.bridge_address.rpartition('.')[0]}.{10 + i}"
            targets += [[f"node {i} listener", node, NODE_PORT], [f"node {i} swarm port", node, 2377],
                        [f"other trial on node {i}", node, PEER_PORT]]
        targets.append(["wall address listener", "169.254.213.1", NODE_PORT])
        for n, session in enumerate(sessions[:2]):
            # The second prober runs on the listener's node (the others drained meanwhile): peers
            # on one node share its bridge.
            with _only_on(fleet, sessions[2].slot.node if n else None):
                found = await _probe(session, targets, NODE_PORT)
            assert found.pop("relay") == "reached", found
            reached = sorted(f"{name}: {result}" for name, result in found.items() if result.startswith("reached"))
            assert reached == [], f"trial {session.trial_id} on {session.slot.node} reached {reached}"
        assert sessions[1].slot.node == sessions[2].slot.node
    finally:
        for session in sessions:
            with contextlib.suppress(Exception):
                await session.kill(KillPolicy())
            await session.cleanup()
        await sandbox.close()
        model.close()
        host.close()


async def test_local_swarm_jobs_reach_their_relay_and_nothing_else(tmp_path):
    """This machine's own single-node swarm: the walled bridge is on this machine, the wall
    relays straight to the loopback model, and this machine's addresses are closed."""
    from tests.adversarial.test_docker_network_walls import _docker0, _host_address
    from tests.core.sandbox_support import swarm_client

    swarm_client().close()
    folder = suite_copy(SMOKE, tmp_path / "suite", 'kind = "swarm"\ncpus = 0.25\nmemory = "256m"',
                        suite_id=unique_id("swarm-walls-local"))
    suite = load_suite(folder)
    sandbox = SwarmSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    model, host = await _answering("127.0.0.1"), await _answering("0.0.0.0")
    sessions: list = []
    try:
        relay_host, relay_port = await _open_walled(sandbox, suite.task("count-lines"), sessions, 2, "swloc", model)
        peers = await _listening(sessions[1])
        port = host.sockets[0].getsockname()[1]
        targets = [["relay", relay_host, int(relay_port)], ["docker0 listener", _docker0(), port],
                   ["host listener", _host_address(), port], ["swarm port", _host_address(), 2377],
                   ["wall address listener", relay_host, port]]
        targets += [[f"other trial at {address}", address, PEER_PORT] for address in peers]
        found = await _probe(sessions[0], targets, port)
        assert found.pop("relay") == "reached", found
        reached = sorted(f"{name}: {result}" for name, result in found.items() if result.startswith("reached"))
        assert reached == [], f"the job reached {reached}"
    finally:
        for session in sessions:
            with contextlib.suppress(Exception):
                await session.kill(KillPolicy())
            await session.cleanup()
        await sandbox.close()
        model.close()
        host.close()


def test_a_run_on_the_walled_fleet_is_metered(tmp_path, db, fleet):
    """The whole smoke suite on the fleet, its jobs on the walled network: every trial's model
    calls went through the walls' relays and were metered."""
    suite_id = unique_id("swarm-walled-run")
    suite = suite_copy(SMOKE, tmp_path / "suite", fleet.sandbox(), suite_id=suite_id)
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    trials = Store(db).trials(suite_id)
    assert_smoke_verdicts(trials, "swarm")
    metered = [t for t in trials if t["status"] == "passed"]
    assert metered and all((t["uncached_input"] or 0) + (t["output"] or 0) > 0 for t in metered), trials


def test_host_network_is_said_by_the_suite_and_noted():
    """Jobs are walled unless the suite says ``network = "host"``; then each transcript says
    what the job reaches."""
    from agentmeter_tui.core.sandboxes.docker.nodewall import WALLED, host_network_note, job_networks
    from agentmeter_tui.core.sandboxes.docker.swarm import SwarmSettings

    assert SwarmSettings().network == WALLED
    assert job_networks(WALLED, "agentmeter-walled-swarm") == ["agentmeter-walled-swarm"]
    assert host_network_note(WALLED) is None
    assert job_networks("host", "agentmeter-walled-swarm") == ["host"]
    assert "fleet's registry" in host_network_note("host")
