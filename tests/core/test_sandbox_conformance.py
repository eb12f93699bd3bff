"""Every sandbox kind passes the checklist of ``core/sandboxes/conformance.py`` (files in and
out, exec, timeout, streamed output, kill, file walls) on a live session: local, docker (copy
and bind workspaces), ssh against a real sshd, swarm on the engine's swarm. A kind registered
without a way to open a session here fails the registry test below, so a new kind cannot skip
the checklist."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmeter_tui.core.sandboxes import SANDBOXES, conformance
from agentmeter_tui.core.sandboxes.base import SandboxSession
from tests.adversarial.walls_support import kinds, session_of

pytestmark = pytest.mark.slow

KINDS = ("local", "docker-copy", "docker-bind", "ssh", "swarm")
# The file the walls check must leave alone: on this machine for the kinds whose trials see its
# paths (local, ssh on 127.0.0.1), else in the container, beside the trial's folders.
HOST_PATHS = ("local", "ssh")


def outside_of(kind: str, session: SandboxSession, tmp_path: Path) -> conformance.Outside:
    if kind in HOST_PATHS:
        host = tmp_path / "outside.txt"
        host.write_bytes(b"kept as it is\n")

        async def read_host() -> bytes:
            return host.read_bytes()

        return conformance.Outside(str(host), read_host)

    # A file of the image, the same in every container of it: a swarm trial's commands are each
    # a new job's container, whose own /etc/hostname (off the host network) differs every time.
    async def read_container() -> bytes:
        return (await session.exec(["cat", "/etc/os-release"])).stdout

    return conformance.Outside("/etc/os-release", read_container)


@pytest.mark.parametrize("kind", kinds(*KINDS))
async def test_every_kind_passes_the_checklist(tmp_path, kind):
    async with session_of(tmp_path, kind) as (_suite, session):
        results = await conformance.run(session, outside_of(kind, session, tmp_path))
    failed = [f"{check.name}: {check.detail}" for check in results if not check.ok]
    assert [check.name for check in results] == list(conformance.CHECKS)
    assert not failed, failed


def test_every_registered_kind_runs_the_checklist():
    covered = {kind.split("-")[0] for kind in KINDS}
    assert set(SANDBOXES.names()) <= covered, f"kinds without the checklist: {set(SANDBOXES.names()) - covered}"
