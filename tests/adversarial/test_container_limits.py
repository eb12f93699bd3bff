"""An agent fills its container's writable places, forks without end, and as root uses the
capabilities Docker gives root by default (issue 37, item 11). Today the docker workspace
volume takes whatever is written (the engine's disk fills), swarm jobs have no pids limit,
and a root agent makes device nodes, opens raw sockets and changes its uid. The suite sets
small limits (64 MiB, 2,000 files, 64 processes) so the test stays small."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentmeter_tui.core.sandboxes.base import LaunchSpec
from agentmeter_tui.core.suites.load import load_suite
from tests.adversarial.walls_support import kinds
from tests.core.sandbox_support import SMOKE, docker_client, suite_copy, swarm_client, unique_id

LIMITS = 'pids = 64\nworkspace_size = "64m"\ntmp_size = "16m"'
TABLES = {"docker-copy": f'kind = "docker"\nwarm = 0\nworkspace_files = 2000\n{LIMITS}',
          "swarm": f'kind = "swarm"\ncpus = 0.5\nmemory = "256m"\n{LIMITS}'}
# Forks until the kernel refuses (children wait on a pipe, so every one stays alive), prints
# how many it made, then ends them all.
FORK_BOMB = r"""
import os, sys
r, w = os.pipe()
made = 0
try:
    while made < 600:
        if os.fork() == 0:
            os.close(w); os.read(r, 1); os._exit(0)
        made += 1
except OSError as exc:
    print("REFUSED", exc.errno, flush=True)
print("FORKED", made, flush=True)
os.close(w)
"""
# Writes its work, then forks until the kernel refuses, and leaves every child running (each
# holds the pipe's write end too): the job's container has no pid left for anything else.
LEFT_AT_THE_LIMIT = r"""
import os, sys
open("work.txt", "w").write("done before the bomb\n")
r, w = os.pipe()
made = 0
try:
    while made < 600:
        if os.fork() == 0:
            os.read(r, 1); os._exit(0)
        made += 1
except OSError as exc:
    print("REFUSED", exc.errno, flush=True)
"""
ROOT_POWERS = r"""
import os, socket
def attempt(name, action):
    try:
        action()
        print(name, "ALLOWED", flush=True)
    except OSError as exc:
        print(name, "REFUSED", exc.errno, flush=True)
attempt("mknod", lambda: os.mknod("node", 0o600 | 0o020000, os.makedev(1, 3)))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
attempt("setuid", lambda: os.setuid(4242))
"""


@contextlib.asynccontextmanager
async def trial(tmp_path: Path, kind: str, extra: str = "", task_toml: str = "") -> AsyncIterator:
    """One trial's session in ``kind`` with the suite's small limits (and ``extra`` settings)."""
    from agentmeter_tui.core.sandboxes import SANDBOXES

    (docker_client if kind.startswith("docker") else swarm_client)().close()
    folder = suite_copy(SMOKE, tmp_path / "suite", TABLES[kind] + extra, suite_id=unique_id("limits"))
    if task_toml:
        with (folder / "count-lines" / "task.toml").open("a") as f:
            f.write(task_toml)
    suite = load_suite(folder)
    sandbox = SANDBOXES.get(suite.spec.sandbox.kind)(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    try:
        await sandbox.preflight()
        session = await sandbox.open(suite.task("count-lines"), 1, f"limits{unique_id('t')[-6:]}00000")
        try:
            yield session
        finally:
            await session.cleanup()
    finally:
        await sandbox.close()


async def run(session, argv: list[str]) -> tuple[int, str]:
    lines: list[bytes] = []
    agent = await session.start(LaunchSpec(argv, {}), lambda stream, batch: lines.extend(batch))
    code = await agent.wait()
    return code, b"\n".join(lines).decode(errors="replace")


@pytest.mark.parametrize("kind", kinds("docker-copy", "swarm"))
async def test_the_workspace_is_full_at_its_limit(tmp_path, kind):
    """512 MiB and 150,000 files into the workspace: ENOSPC at 64 MiB (the rest never reaches
    the engine's disk) and, in docker, at 2,000 files (a swarm job's tmpfs has no inode
    option in the engine's API: its files are bounded by the job's memory limit)."""
    async with trial(tmp_path, kind) as session:
        code, output = await run(session, ["sh", "-c", f"cd {session.workspace} && "
                                           "dd if=/dev/zero of=big bs=1M count=512 2>&1; echo dd=$?; rm -f big; "
                                           "mkdir many && cd many && i=0; while [ $i -lt 150000 ]; do "
                                           "true > f$i || break; i=$((i+1)); done; echo files=$i"])
        assert "No space left on device" in output, output
        assert "dd=0" not in output, output
        if kind == "docker-copy":
            assert "files=" in output and int(output.rsplit("files=", 1)[1].split()[0]) < 2000, output


@pytest.mark.parametrize("kind", kinds("docker-copy", "swarm"))
async def test_a_fork_bomb_stops_at_the_pids_limit(tmp_path, kind):
    async with trial(tmp_path, kind) as session:
        await session.write_files("scratch", {"bomb.py": FORK_BOMB.encode()})
        code, output = await run(session, ["python3", f"{session.scratch}/bomb.py"])
        assert "REFUSED" in output, output
        assert int(output.rsplit("FORKED", 1)[1].split()[0]) < 64, output


@pytest.mark.parametrize("kind", kinds("swarm"))
async def test_a_job_left_at_its_pids_limit_still_sends_its_files_back(tmp_path, kind):
    """The agent's work comes back to the verifier even when what it left running holds every
    pid of the job's container: the job ends those first (before, its tar could not fork, its
    files came back empty, and reading them raised tarfile's ReadError out of the trial)."""
    async with trial(tmp_path, kind) as session:
        await session.write_files("scratch", {"bomb.py": LEFT_AT_THE_LIMIT.encode()})
        code, output = await run(session, ["python3", f"{session.scratch}/bomb.py"])
        assert "REFUSED" in output, output
        assert (session.mirror / "workspace" / "work.txt").read_text() == "done before the bomb\n"


@pytest.mark.parametrize("kind", kinds("docker-copy", "swarm"))
async def test_a_root_agent_has_no_root_powers_beyond_its_files(tmp_path, kind):
    async with trial(tmp_path, kind, '\nuser = "root"') as session:
        await session.write_files("scratch", {"powers.py": ROOT_POWERS.encode()})
        code, output = await run(session, ["sh", "-c", f"cd {session.scratch} && id -u && python3 powers.py"])
        assert output.splitlines()[0] == "0", output  # root still
        for power in ("mknod", "raw", "setuid"):
            assert f"{power} REFUSED" in output, output


@pytest.mark.docker
async def test_a_task_gets_back_the_capability_it_names(tmp_path):
    async with trial(tmp_path, "docker-copy", '\nuser = "root"', '\n[environment]\ncapabilities = ["net_raw"]\n') \
            as session:
        await session.write_files("scratch", {"powers.py": ROOT_POWERS.encode()})
        code, output = await run(session, ["sh", "-c", f"cd {session.scratch} && python3 powers.py"])
        assert "raw ALLOWED" in output and "mknod REFUSED" in output, output


def test_a_capability_that_does_not_exist_is_refused_at_load(tmp_path):
    folder = suite_copy(SMOKE, tmp_path / "suite", 'kind = "local"', suite_id=unique_id("caps"))
    with (folder / "count-lines" / "task.toml").open("a") as f:
        f.write('\n[environment]\ncapabilities = ["NET_RAWR"]\n')
    with pytest.raises(Exception) as raised:
        load_suite(folder)
    assert "NET_RAWR" in str(raised.value) and "task.toml" in str(raised.value)
