"""Sessions of each sandbox kind for the file-wall attacks, and what an agent plants in them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentmeter_tui.core.sandboxes.base import LaunchSpec, SandboxSession
from agentmeter_tui.core.suites.suite import Suite
from agentmeter_tui.core.suites.load import load_suite
from tests.conftest import need
from tests.core.sandbox_support import SMOKE, docker_client, suite_copy, swarm_client, unique_id
from tests.core.sshd_support import SshdInstance, sshd_available

SECRET = "HOST-SECRET-4f1c"
_MARKS = {"local": (), "docker-copy": (pytest.mark.docker,), "docker-bind": (pytest.mark.docker,),
          "ssh": (pytest.mark.ssh,), "swarm": (pytest.mark.docker,)}


def kinds(*names: str) -> list:
    """Sandbox kinds as test parameters, each with the marker of what it needs."""
    return [pytest.param(name, marks=_MARKS[name], id=name) for name in names or _MARKS]


def nest(root: Path, levels: int, bottom: dict[str, bytes] | None = None) -> Path:
    """``root/d/d/.../d`` ``levels`` deep, made by descriptor (past PATH_MAX no path names it), with
    ``bottom``'s files (name -> bytes) in the last folder; returns ``root/d``, for the test to
    remove with ``hostfs.remove_tree`` (pytest's own removal of old temporary folders recurses)."""
    root.mkdir(exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(parent)
    for name, data in (bottom or {}).items():
        out = os.open(name, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(out, data)
        os.close(out)
    os.close(fd)
    return root / "d"


def host_files(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of this machine and a file only root may read, both outside every trial."""
    folder = tmp_path / "host-folder"
    folder.mkdir()
    secret = tmp_path / "host-secret"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    return folder, secret


def _suite(tmp_path: Path, kind: str) -> Suite:
    if kind == "local":
        table = 'kind = "local"'
    elif kind == "local-unwalled":  # no namespaces: what the host-side walls alone must hold
        table = 'kind = "local"\nisolation = "none"'
    elif kind.startswith("docker"):
        docker_client().close()
        table = f'kind = "docker"\nworkspace = "{kind.split("-")[1]}"\nwarm = 0'
    elif kind == "swarm":
        swarm_client().close()
        table = 'kind = "swarm"\ncpus = 0.5\nmemory = "256m"'
    else:
        need(sshd_available(), "sshd and ssh-keygen are needed, as root")
        sshd = SshdInstance(tmp_path / "sshd").start()
        _SSHD.append(sshd)
        table = sshd.sandbox_toml(slots=1)
    return load_suite(suite_copy(SMOKE, tmp_path / "suite", table, suite_id=unique_id(f"walls-{kind}")))


_SSHD: list[SshdInstance] = []


@contextlib.asynccontextmanager
async def session_of(tmp_path: Path, kind: str) -> AsyncIterator[tuple[Suite, SandboxSession]]:
    """A trial's session in sandbox ``kind`` on the smoke suite's count-lines task."""
    from agentmeter_tui.core.sandboxes import SANDBOXES

    suite = _suite(tmp_path, kind)
    sandbox = SANDBOXES.get(suite.spec.sandbox.kind)(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    try:
        await sandbox.preflight()
        session = await sandbox.open(suite.task("count-lines"), 1, f"walls{unique_id('t')[-6:]}00000")
        try:
            yield suite, session
        finally:
            await session.cleanup()
    finally:
        await sandbox.close()
        # The trial's folder is removed in the background: wait for it, or a deep tree the
        # agent left outlives the test's event loop (and pytest's own cleanup recurses on it).
        from agentmeter_tui.core import procs
        await procs.BACKGROUND.drain()
        while _SSHD:
            _SSHD.pop().stop()


async def agent_does(session: SandboxSession, script: str) -> str:
    """Run ``script`` as the agent of ``session`` (in its scratch folder); its output."""
    lines: list[bytes] = []
    agent = await session.start(LaunchSpec(["sh", "-c", f"cd {session.scratch} && {script}"], {}),
                                lambda stream, batch: lines.extend(batch))
    code = await agent.wait()
    output = b"\n".join(lines).decode()
    assert code == 0, output
    return output
