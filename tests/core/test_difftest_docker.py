"""The differential verifier's docker sides against a real engine: a docker trial's tool is built
and run in containers of its image (never on this machine) and judged exactly as on this
machine; a candidate that tries to escape (write outside its workspace, read the runner's
files, reach the network) is contained; nothing is left on the engine."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import threading
from pathlib import Path

import pytest

from agentmeter_tui.core.difftest.cases import Case, CaseFile, CommandClass, load_cases, save_cases
from agentmeter_tui.core.sandboxes.docker.difftest import DockerSides, Limits
from agentmeter_tui.core.difftest.executor import ToolCommand
from agentmeter_tui.core.difftest.oracle import clear_oracle_cache
from agentmeter_tui.core.sandboxes.docker.engine import Engine
from agentmeter_tui.core.sandboxes.docker.images import ensure_host_image
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.load import load_task
from agentmeter_tui.core.verifiers.differential import DifferentialVerifier
from tests.conftest import agentmeter
from tests.core.sandbox_support import docker_engine_fixture, leftovers, swarm_client, unique_id  # noqa: F401
from tests.core.test_difftest_verifier import SUITE, TASKS, scenario_tool
from tests.waiting import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def trim_cases(task: Path, per_class: int) -> None:
    cases = load_cases(task / "tests" / "cases.json")
    trimmed = CaseFile(**{**cases.model_dump(), "classes": [
        {**cls.model_dump(), "cases": [c.model_dump() for c in cls.cases[:per_class]]} for cls in cases.classes]})
    save_cases(trimmed, task / "tests" / "cases.json")


def left_on_engine(client, suite_id: str) -> dict[str, list[str]]:
    """Containers, volumes and committed images carrying ``suite_id``'s label."""
    found = leftovers(client, suite_id)
    images = client.api.images(filters={"label": f"agentmeter.suite={suite_id}"})
    if images:
        found["images"] = [i["Id"] for i in images]
    return found


def judged_like_this_machine(tmp_path: Path, db: Path, sandbox: str, tasks: tuple[str, ...], per_class: int,
                             sandbox_kind: str) -> str:
    """Run the cli-tools suite (``tasks``, cases trimmed to ``per_class`` a class) in ``sandbox``;
    check every trial's funnel, class by class, equals the same scripted tool judged by the local
    executor. Returns the suite id (its objects on an engine carry it)."""
    suite_id = unique_id(f"difftest-{sandbox_kind}")
    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite)
    for task in tasks:
        trim_cases(suite / task, per_class)
    text = re.sub(r'(?m)^id = "cli-tools"', f'id = "{suite_id}"', (suite / "suite.toml").read_text(), count=1)
    text = re.sub(r"(?m)^tasks = .*$", f"tasks = {json.dumps(list(tasks))}", text, count=1)
    (suite / "suite.toml").write_text(text + f"\n[sandbox]\n{sandbox}\n")
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=1200)
    assert result.returncode == 0, result.stderr + result.stdout
    trials = Store(db).trials(suite_id)
    assert len(trials) == 2 * len(tasks) and {t["sandbox"] for t in trials} == {sandbox_kind}, \
        [(t["task_id"], t["model"], t["attempt"], t["status"], t["reason"], t["error"]) for t in trials]
    clear_oracle_cache()
    for trial in trials:
        details = json.loads(trial["extra"])["verifier"]
        workspace = tmp_path / f"{trial['task_id']}-{trial['model']}"
        workspace.mkdir()
        scenario_tool(trial["task_id"], trial["model"], workspace)
        local = asyncio.run(DifferentialVerifier(load_task(suite / trial["task_id"])).judge_folder(workspace))
        assert details["scores"] == local.details["scores"], trial["task_id"] + " " + trial["model"]
        assert details["classes"] == local.details["classes"]
        assert trial["quality"] == local.quality and trial["status"] == ("passed" if local.passed else "failed")
    assert {(t["model"], t["status"]) for t in trials} == {("builder", "passed"), ("bungler", "failed")}
    return suite_id


def test_cli_tools_in_docker_judge_like_this_machine(tmp_path, db, docker_engine):
    """The whole suite (6 cases a class) in the docker sandbox."""
    suite_id = judged_like_this_machine(tmp_path, db, 'kind = "docker"', TASKS, 6, "docker")
    assert left_on_engine(docker_engine, suite_id) == {}


def test_a_swarm_trial_is_judged_on_the_manager(tmp_path, db):
    """A swarm trial's sides run as containers on the swarm's manager engine, from the task's image."""
    client = swarm_client()
    suite_id = judged_like_this_machine(tmp_path, db, 'kind = "swarm"\ncpus = 0.5\nmemory = "256m"',
                                        ("kv-store",), 4, "swarm")
    assert left_on_engine(client, suite_id) == {}


# -- a candidate that tries to get out -------------------------------------------------------------

ESCAPE = r'''
import os, socket, sys
def attempts(when):
    found = []
    for path in (CANARY + "/pwned-" + when, "/tmp/agentmeter-difftest-escape-" + when,
                 os.path.expanduser("~") + "/pwned-" + when):
        try:
            with open(path, "w") as handle:
                handle.write("escaped")
        except OSError as exc:
            found.append("write " + type(exc).__name__)
    try:
        with open(SECRET) as handle:
            found.append("read " + handle.read())
    except OSError as exc:
        found.append("read " + type(exc).__name__)
    for host in ("127.0.0.1", "172.17.0.1", "10.0.2.2"):
        try:
            socket.create_connection((host, PORT), timeout=2).close()
            found.append("connected " + host)
        except OSError:
            found.append("no network")
    return found
'''
ORACLE_TOOL = 'import sys\nprint("tool", *sys.argv[1:])\n'


def escape_task(root: Path, canary: Path, secret: Path, port: int) -> tuple[Path, Path]:
    """A task whose oracle is harmless and a candidate that tries to escape at install and in
    every case; it prints what it managed, so a candidate that got nowhere behaves like the oracle."""
    task = root / "task"
    (task / "tests" / "oracle").mkdir(parents=True)
    (task / "instruction.md").write_text("Write tool.py.\n")
    (task / "task.toml").write_text('[task]\nid = "escape"\n\n[verifier]\nkind = "differential"\n'
                                    'run = "{python} -S {tool}/tool.py"\ninstall = "{python} -S install.py"\n')
    cases = CaseFile(classes=[CommandClass(id="tool", cases=[Case(id=f"tool#{n}", argv=[str(n)]) for n in range(3)])])
    save_cases(cases, task / "tests" / "cases.json")
    (task / "tests" / "oracle" / "tool.py").write_text(ORACLE_TOOL)
    (task / "tests" / "oracle" / "install.py").write_text("print('installed')\n")
    prelude = f"CANARY = {str(canary)!r}\nSECRET = {str(secret)!r}\nPORT = {port}\n" + ESCAPE
    candidate = root / "candidate"
    candidate.mkdir()
    (candidate / "escape.py").write_text(prelude)
    (candidate / "install.py").write_text("import escape\nprint('installed')\n"
                                          "print(*escape.attempts('install'), file=__import__('sys').stderr)\n")
    (candidate / "tool.py").write_text("import sys, escape\nfound = escape.attempts('case')\n"
                                       "print(*found, file=sys.stderr)\nprint('tool', *sys.argv[1:])\n")
    return task, candidate


class Listener(threading.Thread):
    """Counts connections on every address of this machine at one port."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.create_server(("0.0.0.0", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


async def test_a_planted_candidate_is_contained(tmp_path, docker_engine):
    suite_id = unique_id("difftest-escape")
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep.txt").write_text("untouched\n")
    secret = Path.home() / f".agentmeter-difftest-secret-{os.getpid()}"
    secret.write_text("s3cr3t-of-the-runner\n")
    listener = Listener()
    listener.start()
    escaped = [Path(f"/tmp/agentmeter-difftest-escape-{when}") for when in ("install", "case")]
    try:
        task, candidate = escape_task(tmp_path, canary, secret, listener.port)
        verifier = DifferentialVerifier(load_task(task))
        engine = Engine("local", None, docker_engine, True)
        sides = await DockerSides.create(engine, ensure_host_image(docker_engine), Limits(),
                                         {"agentmeter.suite": suite_id})
        clear_oracle_cache()
        result = await verifier.judge_folder(candidate, executor=sides)
        report = result.details
        assert report["build"]["candidate"]["ok"], report["build"]
        install_said = report["build"]["candidate"]["output"]
        assert re.search(r"read (FileNotFound|Permission)Error", install_said), install_said
        assert "s3cr3t" not in install_said and "connected" not in install_said
        assert install_said.count("no network") == 3
        # Every case behaved like the oracle: the tool printed only its argv, nothing leaked.
        assert result.passed and result.quality == 1.0, result.output
        assert sorted(p.name for p in canary.iterdir()) == ["keep.txt"]
        assert (canary / "keep.txt").read_text() == "untouched\n"
        assert not any(path.exists() for path in escaped)
        assert not list(Path.home().glob("pwned-*"))
        assert listener.accepted == 0
        assert left_on_engine(docker_engine, suite_id) == {}
    finally:
        listener.sock.close()
        secret.unlink()
        for path in escaped:
            path.unlink(missing_ok=True)
        clear_oracle_cache()


async def test_case_outputs_show_the_attempts_failed(tmp_path, docker_engine):
    """The same candidate's stderr, per case: every write refused, the secret absent, no network."""
    suite_id = unique_id("difftest-escape-cases")
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t\n")
    task, candidate = escape_task(tmp_path, tmp_path / "canary", secret, 9)
    engine = Engine("local", None, docker_engine, True)
    sides = await DockerSides.create(engine, ensure_host_image(docker_engine), Limits(),
                                     {"agentmeter.suite": suite_id})
    from agentmeter_tui.core.difftest import load_cases as load

    command = ToolCommand(run="{python} -S {tool}/tool.py", install="{python} -S install.py")
    side = sides(tmp_path, command)
    try:
        assert (await side.build(candidate)).ok
        cases = load(task / "tests" / "cases.json")
        runs = await side.run_batch([(c, []) for c in cases.classes[0].cases])
    finally:
        await side.close()
    for run in runs:
        assert run.exit_code == 0 and run.stdout.startswith("tool ")
        said = run.stderr.split()
        # canary (absent here), /tmp (writable but the container's own tmpfs), HOME (the case's own)
        assert said.count("write") <= 1 and "s3cr3t" not in run.stderr
        assert "connected" not in run.stderr and run.stderr.count("no network") == 3
    assert left_on_engine(docker_engine, suite_id) == {}


def test_doctor_clean_removes_a_dead_runners_side_images(docker_engine):
    from agentmeter_tui.core.sandboxes.docker.engine import DIFFTEST, MANAGED, RUNNER, SUITE, clean_leftovers

    suite_id = unique_id("difftest-clean")
    dead = f"{socket.gethostname()}:{2 ** 22 + 7}:0"  # above pid_max: no process has it
    container = docker_engine.containers.create(ensure_host_image(docker_engine), ["true"], labels={
        MANAGED: "1", RUNNER: dead, DIFFTEST: "s0-test", SUITE: suite_id})
    try:
        image = container.commit(repository="agentmeter-difftest", tag=suite_id)
    finally:
        container.remove(force=True)
    report = clean_leftovers(client=docker_engine)
    assert f"agentmeter-difftest:{suite_id}" in report.images
    assert left_on_engine(docker_engine, suite_id) == {}
    assert image.id not in {i.id for i in docker_engine.images.list(name="agentmeter-difftest")}


async def test_an_evaluation_cancelled_mid_build_leaves_nothing(tmp_path, docker_engine):
    """The verifier's timeout cancels a side while the engine is making its container or image:
    what the engine still makes is removed once it exists."""
    suite_id = unique_id("difftest-cancel")
    engine = Engine("local", None, docker_engine, True)
    sides = await DockerSides.create(engine, ensure_host_image(docker_engine), Limits(),
                                     {"agentmeter.suite": suite_id})
    tool = tmp_path / "tool"
    tool.mkdir()
    (tool / "tool.py").write_text("print('hi')\n")
    created = asyncio.Event()
    side = sides(tmp_path, ToolCommand(run="{python} -S {tool}/tool.py", install="sleep 30"))
    original = side._made

    async def noted(make, *args, **kwargs):
        created.set()
        return await original(make, *args, **kwargs)

    side._made = noted
    orphans: list[bool] = []
    remove_orphan = side._remove_orphan

    def counted(made):
        orphans.append(not made.cancelled() and made.exception() is None)
        remove_orphan(made)

    side._remove_orphan = counted
    build = asyncio.ensure_future(side.build(tool))
    await created.wait()  # the engine is making the build container now
    build.cancel()
    with pytest.raises(asyncio.CancelledError):
        await build
    await side.close()

    def gone() -> bool:
        return left_on_engine(docker_engine, suite_id) == {}

    await asyncio.to_thread(wait_for, lambda: orphans, "the engine to finish the container it was making")
    assert orphans == [True]  # it was made after the cancellation, and then removed
    await asyncio.to_thread(wait_for, gone, "the cancelled side's container to be removed")


async def test_the_shared_oracle_is_not_labelled_with_the_trial_that_made_it(tmp_path, docker_engine):
    """The oracle side is shared by every trial of a task verifying at once, so it outlives the
    trial whose sandbox made it: that trial's cleanup (a swarm session removes every container
    labelled with its token) must not find it. The candidate side is the trial's own and does."""
    from agentmeter_tui.core.difftest.oracle import shared_oracle
    from agentmeter_tui.core.sandboxes.docker.engine import TRIAL, trial_labels

    suite_id = unique_id("difftest-shared")
    token = unique_id("token")
    engine = Engine("local", None, docker_engine, True)
    sides = await DockerSides.create(engine, ensure_host_image(docker_engine), Limits(),
                                     trial_labels(suite_id, 1, token))
    tool = tmp_path / "tool"
    tool.mkdir()
    (tool / "tool.py").write_text("import sys\nprint('tool', *sys.argv[1:])\n")
    command = ToolCommand(run="{python} -S {tool}/tool.py")
    cases = CaseFile(classes=[CommandClass(id="tool", cases=[Case(id="tool#1", argv=["1"])])])

    def labelled(selector: str) -> list[dict]:
        return docker_engine.api.containers(all=True, filters={"label": selector})

    candidate = sides(tmp_path, command)
    try:
        async with shared_oracle(tool, cases, command, sides, use_cache=False) as oracle:
            assert (await oracle.build()).ok and (await candidate.build(tool)).ok
            [run] = await oracle.run_batch([(cases.classes[0].cases[0], [])])
            assert run.stdout == "tool 1\n"
            mine = labelled(f"{TRIAL}={token}")
            assert [c["Id"] for c in mine] == [candidate.container]
            assert len(labelled(f"agentmeter.suite={suite_id}")) == 2  # the oracle's, apart from the trial
    finally:
        await candidate.close()
    assert left_on_engine(docker_engine, suite_id) == {}
