"""Issue 37, the local agent's network: an agent in a local trial reaches its model through
the metering proxy and nothing else on this machine: not a listener on 127.0.0.1 or ::1 that
is not its model path (the test's, the runner's scripted server behind the proxy, another
runner's servers, sshd), not a listener on a non-loopback address of this machine. Its own
network namespace has only its loopback, on which the runner listens at its model's port."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from tests.adversarial.support import transcript

PROBE = Path(__file__).parent / "agents" / "net_probe.py"
SCENARIO = '[[turns]]\ntext = "done"\n'


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


def _listeners() -> dict[str, socket.socket]:
    hosts = ["127.0.0.1", "0.0.0.0"]
    if socket.has_ipv6:
        with contextlib.suppress(OSError):
            _listener("::1").close()
            hosts.append("::1")
    return {host: _listener(host) for host in hosts}


def _targets(listeners: dict[str, socket.socket]) -> list[str]:
    """The test's listeners by loopback and by a non-loopback address of this machine, and sshd's ports."""
    targets = [f"{host}:{sock.getsockname()[1]}" for host, sock in listeners.items() if host != "0.0.0.0"]
    address = _host_address()
    if address is not None:
        targets.append(f"{address}:{listeners['0.0.0.0'].getsockname()[1]}")
    return [*targets, "127.0.0.1:22", "127.0.0.1:2222"]  # sshd, where one runs


def _found(db: Path, targets: list[str], reached: dict[str, int]) -> dict:
    """The probe's findings, checked: nothing answered but its model path, which did."""
    ((trial, lines),) = transcript(db)
    found = json.loads(next(line for line in lines if line.startswith("{")))
    assert found["tried"] >= len(targets), found
    assert found["reached"] == [], found
    assert reached == dict.fromkeys(reached, 0), reached
    assert found["model"] == 200, found  # its one path works
    assert trial["status"] == "passed", lines
    return trial


def _namespaces() -> set[str]:
    """The network namespaces some process of this machine is in."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            found.add(os.readlink(f"/proc/{pid}/ns/net"))
    return found


def test_a_local_agent_reaches_its_model_path_only(tmp_path):
    from tests.e2e.harness import run_scenario

    listeners = _listeners()
    targets = _targets(listeners)
    before = _namespaces()
    try:
        result = run_scenario(tmp_path, "command", SCENARIO, suite_extra="proxy = true",
                              cli_args=["{python}", str(PROBE), *targets])
        reached = {host: _accepted(sock) for host, sock in listeners.items()}
    finally:
        for sock in listeners.values():
            sock.close()
    _found(tmp_path / "e2e.db", targets, reached)
    assert result.usage.raw > 0 and result.extra["scripted"]["calls"] == 1, result.row  # and is metered
    # Nothing left on the host: no rule set to remove, and no process of the run still in a
    # namespace of its (the runner's descriptors closed with it).
    left = _namespaces() - before
    assert not any(namespace in left for namespace in _run_namespaces(tmp_path / "e2e.db")), left


def _run_namespaces(db: Path) -> set[str]:
    """The namespaces the probe saw itself in (its line says, from /proc/self)."""
    ((_, lines),) = transcript(db, "stdout")
    return {json.loads(next(line for line in lines if line.startswith("{")))["namespace"]}


def test_the_network_wall_holds_when_the_runner_is_not_root(tmp_path):
    """The runner as a uid of no account (test_local_nonroot.py): it cannot open a socket in its
    agent's namespace, so the sandbox's own relay opens the model's port there, piped to a
    unix socket of the runner's; the agent reaches nothing else, and its call is metered."""
    from tests.adversarial.test_local_nonroot import (
        _as_operator,
        _give,
        _namespaces_allowed,
        _operator_folder,
        _refused,
    )
    from tests.e2e.harness import scenario_suite

    operator = _operator_folder()
    listeners = _listeners()
    targets = _targets(listeners)
    try:
        db = operator / "net.db"
        suite = scenario_suite(operator / "suite", "command", SCENARIO, suite_extra="proxy = true",
                               cli_args=["{python}", str(PROBE), *targets])
        _give(operator)
        env = {**os.environ, "HOME": str(operator / "home"), "TMPDIR": str(operator / "tmp"),
               "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("AGENTMETER_SANDBOX_ROOT", None)
        run = _as_operator([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db", str(db)],
                           tmp_path / "hold", operator)
        if not _namespaces_allowed(tmp_path / "hold", operator):
            _refused(run, env, db)
            return
        done = subprocess.run(run, capture_output=True, text=True, env=env, cwd=operator, timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        reached = {host: _accepted(sock) for host, sock in listeners.items()}
        trial = _found(db, targets, reached)
        assert json.loads(trial["extra"])["scripted"]["calls"] == 1, trial  # metered
    finally:
        for sock in listeners.values():
            sock.close()
        shutil.rmtree(operator, ignore_errors=True)
