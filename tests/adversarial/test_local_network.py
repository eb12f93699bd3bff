"""Issue 37, the local agent's network: an agent in a local trial reaches its model through
the metering proxy and nothing else on this machine: not a listener on 127.0.0.1 or ::1 that
is not its model path (the test's, the runner's scripted server behind the proxy, another
runner's servers, sshd), not a listener on a non-loopback address of this machine. Its own
network namespace has only its loopback, on which the runner listens at its model's port."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
from pathlib import Path

import psutil

from tests.adversarial.support import transcript

PROBE = Path(__file__).parent / "agents" / "net_probe.py"


def _listener(host: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen(16)
    sock.setblocking(False)
    return sock


def _host_address() -> str | None:
    """A non-loopback IPv4 address of this machine (none: the test tries loopback only)."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return address.address
    return None


def _accepted(sock: socket.socket) -> int:
    """Connections that reached ``sock`` (queued by the kernel whether or not we accepted)."""
    count = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            sock.accept()[0].close()
            count += 1
    return count


def test_a_local_agent_reaches_its_model_path_only(tmp_path):
    from tests.e2e.harness import run_scenario

    hosts = ["127.0.0.1", "0.0.0.0"]
    if socket.has_ipv6:
        with contextlib.suppress(OSError):
            _listener("::1").close()
            hosts.append("::1")
    listeners = {host: _listener(host) for host in hosts}
    address = _host_address()
    targets = [f"{host}:{sock.getsockname()[1]}" for host, sock in listeners.items() if host != "0.0.0.0"]
    if address is not None:
        targets.append(f"{address}:{listeners['0.0.0.0'].getsockname()[1]}")
    targets += ["127.0.0.1:22", "127.0.0.1:2222"]  # sshd, where one runs
    try:
        result = run_scenario(tmp_path, "command", '[[turns]]\ntext = "done"\n', suite_extra="proxy = true",
                              cli_args=["{python}", str(PROBE), *targets])
        reached = {host: _accepted(sock) for host, sock in listeners.items()}
    finally:
        for sock in listeners.values():
            sock.close()
    ((_, lines),) = transcript(tmp_path / "e2e.db", "stdout")
    found = json.loads(next(line for line in lines if line.startswith("{")))
    assert found["tried"] >= len(targets), found
    assert found["reached"] == [], found  # nothing answered but its model path
    assert reached == dict.fromkeys(listeners, 0), reached
    assert found["model"] == 200, found  # its one path works
    assert result.row["status"] == "passed", result.row
    assert result.usage.raw > 0 and result.extra["scripted"]["calls"] == 1, result.row  # and is metered
