"""An agent plants links in its trial's folders for the runner (root on this machine) to follow
when it writes the verifier's tests and reads the reward and session files back: each
sandbox's host-side file operations must neither write nor read outside the trial's folders.
(Issue 23, item 1.)"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile

import pytest

from agentmeter_tui.core.sandboxes.archive import extract
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.verifiers.command import CommandVerifier
from tests.adversarial.walls_support import SECRET, agent_does, host_files, kinds, nest, session_of
from tests.conftest import FIXTURES, agentmeter
from tests.core.sandbox_support import docker_client, unique_id

def _notes(session) -> str:
    return "\n".join(session.notes)


@pytest.mark.parametrize("kind", kinds())
async def test_planted_links_lead_the_verifier_nowhere(tmp_path, kind):
    """``tests -> <host folder>`` and ``reward.txt -> <host file>``: today the runner wrote the
    task's test.sh into the host folder and stored the secret in the verifier output."""
    folder, secret = host_files(tmp_path)
    async with session_of(tmp_path, kind) as (suite, session):
        await agent_does(session, f"ln -s {folder} tests && ln -s {secret} reward.txt")
        result = await CommandVerifier(suite.task("count-lines")).verify(session)
        assert list(folder.iterdir()) == []
        assert SECRET not in result.output
        assert SECRET.encode() not in b"".join((await session.fetch_files("scratch", ["reward.txt"])).values())
        if kind not in ("docker-copy", "swarm"):  # there the archive's extraction already drops such links
            assert "reward.txt (a symbolic link to" in _notes(session), session.notes
    assert secret.read_text() == SECRET and list(folder.iterdir()) == []


@pytest.mark.parametrize("kind", kinds("local", "docker-bind", "ssh"))
async def test_a_linked_home_folder_is_not_read(tmp_path, kind):
    """``home/.claude -> <host folder>``: the CLI's session files are read from the host."""
    folder, _ = host_files(tmp_path)
    (folder / "projects" / "p").mkdir(parents=True)
    (folder / "projects" / "p" / "s.jsonl").write_text(SECRET)
    async with session_of(tmp_path, kind) as (_, session):
        await agent_does(session, f"cd {session.home} && ln -s {folder} .claude")
        assert await session.fetch_files("home", [".claude/projects/*/*.jsonl"]) == {}
        assert ".claude (a symbolic link to" in _notes(session)


@pytest.mark.docker
async def test_a_scratch_folder_swapped_for_a_link_is_not_followed(tmp_path):
    """docker bind mode: the agent owns /agentmeter, so it can put a link where scratch was;
    the runner then wrote test.sh there and handed the host folder to the agent's uid."""
    folder, _ = host_files(tmp_path)
    async with session_of(tmp_path, "docker-bind") as (suite, session):
        await agent_does(session, f"cd .. && mv scratch old && ln -s {folder} scratch")
        await CommandVerifier(suite.task("count-lines")).verify(session)
        assert list(folder.iterdir()) == [] and folder.stat().st_uid == 0
        assert "scratch (a symbolic link to" in _notes(session)


async def test_a_hard_link_to_a_host_file_is_never_written_into_or_read(tmp_path):
    """Local sandbox: the agent hard-links a root-owned host file as the tests and the reward.
    (Under bwrap no host file is in the agent's view to link: this is the wall that holds
    where the suite says isolation = "none".)"""
    _, secret = host_files(tmp_path)
    other = tmp_path / "host-file"
    other.write_text("untouched")
    async with session_of(tmp_path, "local-unwalled") as (suite, session):
        await agent_does(session, f"mkdir tests && ln {other} tests/test.sh && ln {secret} reward.txt")
        result = await CommandVerifier(suite.task("count-lines")).verify(session)
        assert SECRET not in result.output
        # The verifier reads a folder drawn after the agent stopped; the planted name, read
        # directly, is refused by the wall and named.
        assert await session.fetch_files("scratch", ["reward.txt", "tests/test.sh"]) == {}
        assert "reward.txt (a hard link: 2 names share it)" in _notes(session)
    assert other.read_text() == "untouched" and secret.read_text() == SECRET


@pytest.mark.parametrize("kind", kinds("local", "ssh"))
async def test_a_named_pipe_where_the_runner_writes_is_replaced(tmp_path, kind):
    """A FIFO at tests/test.sh: opening it to write blocks until someone reads. (The test holds
    a reader open on local, so the old code wrote into the pipe instead of hanging.)"""
    async with session_of(tmp_path, kind) as (suite, session):
        await agent_does(session, "mkdir tests && mkfifo tests/test.sh && mkfifo reward.txt")
        reader = os.open(f"{session.scratch}/tests/test.sh", os.O_RDONLY | os.O_NONBLOCK)
        try:
            await session.write_files("scratch", {"tests/test.sh": b"exit 0\n"})
            assert await session.fetch_files("scratch", ["reward.txt", "tests/test.sh"]) == \
                {"tests/test.sh": b"exit 0\n"}
        finally:
            os.close(reader)
        assert "tests/test.sh (a named pipe)" in _notes(session)
        assert "reward.txt (a named pipe)" in _notes(session)


@pytest.mark.parametrize("kind", kinds("local", "ssh"))
async def test_dot_dot_never_leaves_the_trial(tmp_path, kind):
    from agentmeter_tui.core.sandboxes.hostfs import WallError

    async with session_of(tmp_path, kind) as (_, session):
        with pytest.raises(WallError, match="'..' is refused"):
            await session.write_files("scratch", {"../../../escaped.txt": b"x"})
    assert not any(p.name == "escaped.txt" for p in tmp_path.rglob("escaped.txt"))


def test_a_huge_file_from_a_container_is_not_read_whole(tmp_path):
    """``extract`` of what ``get_archive`` streams: a 64 MiB reward file past a 1 MiB limit must
    not be pulled into memory whole (today the stream was joined before anything was checked)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("scratch/reward.txt")
        info.size = 64 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    blob, consumed = data.getvalue(), [0]

    def chunks():
        for start in range(0, len(blob), 1 << 16):
            consumed[0] += 1 << 16
            yield blob[start:start + (1 << 16)]

    extract(chunks(), tmp_path / "out", limit_bytes=1 << 20)
    assert consumed[0] < 2 << 20, f"{consumed[0] >> 20} MiB read for a 1 MiB limit"
    assert not (tmp_path / "out" / "scratch" / "reward.txt").exists()


@pytest.mark.parametrize("sandbox", [pytest.param('kind = "local"', id="local"), pytest.param(
    'kind = "docker"\nworkspace = "bind"\nwarm = 0', marks=pytest.mark.docker, id="docker-bind")])
def test_a_whole_run_keeps_the_walls_and_says_so_in_the_transcript(tmp_path, db, sandbox):
    """The attack through `agentmeter run`: the agent's last act plants the links; the trial
    fails on its own tests, the host folder and file stay as they were, the secret is stored
    nowhere, and the trial's transcript names what the runner refused."""
    if "docker" in sandbox:
        docker_client().close()
    folder, secret = host_files(tmp_path)
    suite = tmp_path / "suite"
    shutil.copytree(FIXTURES / "suites" / "noisy", suite)
    (suite / "noise" / "tests" / "test.sh").write_text("#!/bin/sh\nexit 1\n")
    plant = f"cd ../scratch && ln -s {folder} tests && ln -s {secret} reward.txt"
    (suite / "suite.toml").write_text(f'[suite]\nid = "{unique_id("walls-run")}"\n\n[[models]]\nid = "none"\n'
                                      'provider = "offline"\n\n[providers.offline]\nkind = "none"\n\n'
                                      f'[[clis]]\nadapter = "command"\nargs = ["sh", "-c", "{plant}"]\n\n'
                                      f"[sandbox]\n{sandbox}\n")
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    store = Store(db)
    try:
        (trial,) = store.trials()
        runner_lines = [text for _, _, _, stream, text, _ in store.events(trial["id"]) if stream == "runner"]
        stored = str(trial) + "\n".join(text or "" for *_, text, _ in store.events(trial["id"]))
    finally:
        store.close()
    assert trial["status"] == "failed" and trial["quality"] == 0.0, trial
    assert list(folder.iterdir()) == [] and secret.read_text() == SECRET
    assert SECRET not in stored
    # The verifier's files now go to a folder drawn after the agent stopped (issue 23, item 2), so
    # the planted names are never even opened; had they been, the walls would refuse and say so
    # (test_planted_links_lead_the_verifier_nowhere, test_a_hard_link_...).
    assert not any(str(folder) in line and "written" in line for line in runner_lines), runner_lines


async def test_a_deep_tree_the_agent_leaves_is_removed_with_its_trial(tmp_path):
    """1,500 nested folders in the workspace: shutil.rmtree recursed once per level, raised
    RecursionError in the background and left the trial's folder on the machine."""
    from agentmeter_tui.core import procs

    async with session_of(tmp_path, "local") as (_, session):
        await agent_does(session, f"cd {session.workspace} && i=0; while [ $i -lt 1500 ]; do "
                                  "mkdir d && cd d && i=$((i+1)); done; mkfifo p; ln -s / up")
        root = session.root
    await procs.BACKGROUND.drain()
    assert not root.exists()


@pytest.mark.parametrize("kind", kinds())
async def test_a_deep_tree_does_not_turn_a_verdict_into_an_infra_error(tmp_path, kind):
    """1,200 nested folders in scratch and in the workspace: copies and removals that recurse
    once per level raised RecursionError in the verifier, and an infra-invalid trial is not
    counted: a failing agent could erase its own failure."""
    async with session_of(tmp_path, kind) as (suite, session):
        nest = "i=0; while [ $i -lt 1200 ]; do mkdir d && cd d && i=$((i+1)); done"
        await agent_does(session, f"({nest}) && cd {session.workspace} && ({nest})")
        result = await CommandVerifier(suite.task("count-lines")).verify(session)
        assert result.infra_error is None and not result.passed, result


def test_the_bind_folders_disk_watch_counts_a_tree_deeper_than_a_path_can_name(tmp_path):
    """Docker's bind mode watches the workspace folder's size while the agent runs. An agent that
    nested 1,200 folders made os.walk raise RecursionError in the watch (the trial's cleanup then
    failed: seen in CI); one nested past PATH_MAX could hide what it wrote below from any walk by
    path. 3,000 levels, a MiB at the bottom and a link to / at the top: every block is counted,
    none outside, as du counts them."""
    from agentmeter_tui.core.sandboxes.docker.limits import written_folder
    from agentmeter_tui.core.sandboxes.hostfs import remove_tree

    root = tmp_path / "watched"
    nest(root, 3000, {"bottom": b"x" * (1 << 20)})
    os.symlink("/", root / "up")
    try:
        du = subprocess.run(["du", "-s", "-B1", "-P", "-x", str(root)], capture_output=True, text=True, check=True)
        expected = int(du.stdout.split()[0]) - os.lstat(root).st_blocks * 512
        assert expected > 3000 * 512 + (1 << 20)
        assert written_folder(str(root))() == expected
    finally:  # pytest's own removal of old temporary folders recurses, and would fail on it
        remove_tree(root)


def test_a_dead_runners_deep_trial_folder_is_removed_when_the_next_run_cleans(tmp_path):
    """A runner killed with kill -9 leaves its trial folders; the next run removes those of dead
    owners. One the agent had nested 1,500 folders deep made shutil.rmtree raise RecursionError
    (not an OSError, so ignore_errors did not hold it): the cleanup itself crashed and the folder
    stayed, with every later run crashing on it again."""
    from agentmeter_tui.core.sandboxes.local import remove_dead_owners

    dead = tmp_path / "t1-r999999999-1-abcdefgh"  # no such pid: its owner is gone
    path = dead / "workspace"
    path.mkdir(parents=True)
    for _ in range(1500):
        path = path / "d"
        path.mkdir()
    (path / "f").write_text("x")
    assert remove_dead_owners(tmp_path) == [dead]
    assert not dead.exists()
