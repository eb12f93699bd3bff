"""Docker trials on the default ``isolated`` network try to reach each other and this machine:
each agent connects to the other trials' containers (their addresses as the engine reports
them, and a scan of its own /24), to the network's gateway, to docker0's address, to this
machine's other address, at a listener the test opens on 0.0.0.0 and at Swarm's port. Only
the model relay may answer. Today (issue 37, item 10) 3/3 trials reached another trial's
container and every address of the host: the internal network drops forwarded traffic only."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
import subprocess

import pytest

from agentmeter_tui.core.sandboxes.base import LaunchSpec
from agentmeter_tui.core.sandboxes.docker.containers import ISOLATED_NETWORK
from agentmeter_tui.core.sandboxes.docker.sandbox import DockerSandbox
from agentmeter_tui.core.suites.load import load_suite
from tests.conftest import need
from tests.core.harbor_support import harbor_suite
from tests.core.sandbox_support import SMOKE, docker_client, suite_copy, swarm_client, unique_id

pytestmark = pytest.mark.docker

PEER_PORT = 7007
# Every probe at once (threads): an address behind the wall is a connect that never completes.
PROBE = r"""
import concurrent.futures, json, socket, sys
targets = json.loads(sys.argv[1])
own = open("/etc/hosts").read().split()
mine = next(w for w in own if w.count(".") == 3 and not w.startswith("127."))
prefix = mine.rsplit(".", 1)[0]
scan = [[f"scan {prefix}.{n}", f"{prefix}.{n}", %d] for n in range(1, 255) if f"{prefix}.{n}" != mine]
def probe(target):
    name, host, port = target
    s = socket.socket()
    s.settimeout(4)
    try:
        s.connect((host, port))
        return name, "reached"
    except OSError as exc:
        return name, type(exc).__name__
    finally:
        s.close()
with concurrent.futures.ThreadPoolExecutor(128) as pool:
    found = dict(pool.map(probe, targets + scan))
print("RESULT " + json.dumps(found))
""" % PEER_PORT
LISTEN = (f"import socket; s = socket.socket(); s.bind(('0.0.0.0', {PEER_PORT})); s.listen(64); "
          "print('LISTENING', flush=True)\nwhile True: s.accept()[0].close()")


async def _listener(host: str) -> asyncio.AbstractServer:
    async def answer(reader, writer):
        writer.write(b"hello\n")
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, host, 0)


def _host_address() -> str:
    """This machine's address on its default route (not loopback, not a bridge of Docker's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent: the kernel only picks the source address
        return s.getsockname()[0]


def _docker0() -> str:
    """docker0's address (the default bridge's IPAM often names only its subnet)."""
    shown = subprocess.run(["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True, check=True)
    return shown.stdout.split(" inet ")[1].split("/")[0]


async def _listening(session) -> None:
    """A listener in the trial's container, as another trial's target; returns once it listens."""
    ready = asyncio.Event()

    def seen(stream, batch):
        if any(b"LISTENING" in line for line in batch):
            ready.set()

    await session.start(LaunchSpec(["python3", "-c", LISTEN], {}), seen)
    await ready.wait()


async def _probe(session, targets: list[list]) -> dict[str, str]:
    await session.write_files("scratch", {"probe.py": PROBE.encode()})
    lines: list[bytes] = []
    agent = await session.start(LaunchSpec(["python3", f"{session.scratch}/probe.py", json.dumps(targets)], {}),
                                lambda stream, batch: lines.extend(batch))
    assert await agent.wait() == 0, b"\n".join(lines).decode()
    result = next(line for line in lines if line.startswith(b"RESULT "))
    return json.loads(result[7:])


async def _assert_walled(sessions, network: str, client) -> None:
    """Each trial probes the others, its /24, this machine's addresses and its relay."""
    model, host = await _listener("127.0.0.1"), await _listener("0.0.0.0")
    try:
        host_port = host.sockets[0].getsockname()[1]
        addresses = [client.api.inspect_container(s.container)["NetworkSettings"]["Networks"][network]["IPAddress"]
                     for s in sessions]
        relay = sessions[0].translate_url(f"http://127.0.0.1:{model.sockets[0].getsockname()[1]}/v1")
        relay = await relay if inspect.isawaitable(relay) else relay
        gateway, relay_port = relay.split("//")[1].split("/")[0].split(":")
        for session in sessions:
            await _listening(session)
        for n, session in enumerate(sessions):
            targets = [["relay", gateway, int(relay_port)]]
            targets += [[f"trial {m + 1}", addresses[m], PEER_PORT] for m in range(len(sessions)) if m != n]
            targets += [[f"{name} listener", address, host_port]
                        for name, address in (("gateway", gateway), ("docker0", _docker0()), ("host", _host_address()))]
            targets += [["swarm port", address, 2377] for address in (gateway, _host_address())]
            found = await _probe(session, targets)
            assert found.pop("relay") == "reached", found
            reached = sorted(name for name, result in found.items() if result == "reached")
            assert reached == [], f"trial {n + 1} reached {reached}"
    finally:
        model.close()
        host.close()


async def test_containers_reach_their_relay_and_nothing_else(tmp_path):
    client = docker_client()
    suite = load_suite(suite_copy(SMOKE, tmp_path / "suite", 'kind = "docker"\nwarm = 0',
                                  suite_id=unique_id("net-walls")))
    sandbox = DockerSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    sessions = []
    try:
        await sandbox.preflight()
        for n in range(3):
            sessions.append(await sandbox.open(suite.task("count-lines"), n + 1, f"netwall{n}{unique_id('t')[-6:]}0000"))
        await _assert_walled(sessions, ISOLATED_NETWORK, client)
    finally:
        for session in sessions:
            await session.cleanup()
        await sandbox.close()
        client.close()


@pytest.mark.parametrize("network", ["walled", "host"])
async def test_closed_harbor_trials_in_swarm_reach_their_relay_and_nothing_else(tmp_path, network):
    """``allow_internet = false`` Harbor trials in swarm: on the walled network (the default)
    each node's wall lets them reach their relay and nothing else; on a suite network with a
    route out (``host``) they share an internal swarm-scope bridge instead, which Docker gives
    no ``enable_icc`` option: the runner's filter drops what passes there."""
    from agentmeter_tui.core.sandboxes.docker.nodewall import WALLED_NETWORK
    from agentmeter_tui.core.sandboxes.docker.swarm import SwarmSandbox
    from agentmeter_tui.core.sandboxes.docker.swarmharbor import CLOSED_NETWORK

    client = swarm_client()
    folder, _ = harbor_suite(tmp_path, "agents")
    toml = folder / "suite.toml"
    toml.write_text(toml.read_text().replace('kind = "docker"', f'kind = "swarm"\nnetwork = "{network}"'))
    suite = load_suite(folder)
    sandbox = SwarmSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    sessions = []
    try:
        await sandbox.preflight()
        for n in range(2):
            sessions.append(await sandbox.open(suite.task("greet"), n + 1, f"netwall{n}{unique_id('t')[-6:]}0000"))
        await _assert_walled(sessions, WALLED_NETWORK if network == "walled" else CLOSED_NETWORK, client)
    finally:
        for session in sessions:
            await session.cleanup()
        await sandbox.close()
        client.close()


def test_a_gone_runners_openings_are_closed_by_the_next():
    """A runner killed before it closed leaves its relays' ACCEPT rules: the next runner's wall
    removes them (a later listener on that port of the gateway must not inherit an opening)."""
    from agentmeter_tui.core.sandboxes.docker.hostwall import CHAIN, HostWall

    need(HostWall().problem is None, "root and iptables")
    HostWall()._ensure()
    stale = [CHAIN, "-d", "10.255.255.1", "-p", "tcp", "--dport", "9", "-m", "comment", "--comment",
             f"agentmeter {socket.gethostname()}:999999:1", "-j", "ACCEPT"]
    subprocess.run(["iptables", "-w", "-I", *stale], check=True)
    wall = HostWall()
    wall.allow("10.255.255.2", 9)
    try:
        listed = subprocess.run(["iptables", "-w", "-S", CHAIN], capture_output=True, text=True, check=True).stdout
        assert "10.255.255.1" not in listed and "10.255.255.2" in listed, listed
    finally:
        wall.close()
    listed = subprocess.run(["iptables", "-w", "-S", CHAIN], capture_output=True, text=True, check=True).stdout
    assert "10.255.255.2" not in listed, listed
