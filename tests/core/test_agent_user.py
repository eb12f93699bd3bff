"""The agent's uid has a passwd and group entry (and a HOME) in any task image (issue 24,
item 10): a task image whose /etc/passwd has no uid 1000 (most Debian-based ones) made a CLI
that asks who it is die at start (Qwen Code: ``uv_os_get_passwd returned ENOENT``). The trial
runs on a thin image made from the task's; the task's image itself is left as it was."""

from __future__ import annotations

import shutil

import pytest

from agentmeter_tui.core.sandboxes.base import LaunchSpec
from agentmeter_tui.core.sandboxes.docker.sandbox import DockerSandbox
from agentmeter_tui.core.suites.load import load_suite
from tests.conftest import FIXTURES
from tests.core.sandbox_support import docker_engine_fixture, unique_id  # noqa: F401 - a fixture

pytestmark = pytest.mark.docker

# What node's os.userInfo() asks (getpwuid of the process's uid), asked the same way by Python.
WHO = "id -un; id -gn; python3 -c 'import os, pwd; e = pwd.getpwuid(os.getuid()); print(e.pw_name, e.pw_dir)'"


async def test_an_image_without_the_agents_uid_gets_it_for_the_trial_only(tmp_path, docker_engine):
    suite_dir = tmp_path / "suite"
    shutil.copytree(FIXTURES / "images" / "dockerfile-suite", suite_dir)
    toml = suite_dir / "suite.toml"
    toml.write_text(toml.read_text().replace('id = "docker-image"', f'id = "{unique_id("agent-user")}"'))
    dockerfile = suite_dir / "marker" / "environment" / "Dockerfile"
    # A base without uid 1000, as a Debian image has it (a mark keeps this test's image its own).
    dockerfile.write_text(dockerfile.read_text() + "RUN sed -i '/^agent:/d' /etc/passwd /etc/group"
                          f" && echo {unique_id('mark')} > /etc/agentmeter-test-mark\n")
    suite = load_suite(suite_dir)
    sandbox = DockerSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    lines: list[bytes] = []
    session = await sandbox.open(suite.tasks[0], 1, "usertoken00000001")
    try:
        agent = await session.start(LaunchSpec(["sh", "-c", WHO], {}), lambda stream, batch: lines.extend(batch))
        assert await agent.wait() == 0, b"\n".join(lines)
        assert [line.decode() for line in lines] == ["agent", "agent", "agent /agentmeter/home"]
    finally:
        await session.cleanup()
        await sandbox.close()
    task_image = next(i for i in docker_engine.images.list() for t in i.tags
                      if t.startswith("agentmeter-task/marker:") and i.id != docker_engine.images.get(session.image).id
                      and _mark(docker_engine, i.id) == _mark(docker_engine, session.image))
    passwd = docker_engine.containers.run(task_image.id, ["cat", "/etc/passwd"], remove=True, user="0")
    assert b":1000:" not in passwd  # the task's own image is unchanged
    for image in (session.image, task_image.id):  # the derived image first: it depends on the other
        docker_engine.images.remove(image, force=True)


def _mark(client, image: str) -> bytes:
    return client.containers.run(image, ["cat", "/etc/agentmeter-test-mark"], remove=True, user="0")


@pytest.mark.clis
@pytest.mark.slow
def test_qwen_code_starts_in_an_image_without_the_agents_uid(tmp_path, docker_engine):
    """The failure seen: Qwen Code asks os.userInfo() at start; in an image with no passwd entry
    for uid 1000 it died with `uv_os_get_passwd returned ENOENT` and every trial errored."""
    import io

    from agentmeter_tui.core.sandboxes.archive import TarWriter
    from agentmeter_tui.core.store import Store
    from tests.conftest import agentmeter
    from tests.core.bare_image import bare_image
    from tests.core.test_clis_in_bare_image import _grid_suite
    from tests.e2e.harness import require_cli

    require_cli("qwen-code")
    base = bare_image(docker_engine)
    tag = f"agentmeter-test/bare-nouser:{unique_id('t')}"
    context = io.BytesIO()
    tar = TarWriter(context)
    tar.data("Dockerfile", f"FROM {base}\nRUN sed -i '/^agent:/d' /etc/passwd /etc/group\n".encode())
    tar.close()
    context.seek(0)
    docker_engine.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, pull=False)
    derived = set()
    try:
        suite_id = unique_id("nouser-qwen")
        db = tmp_path / "grid.db"
        result = agentmeter("run", str(_grid_suite(tmp_path, "qwen-code", tag, suite_id)), "--headless", "--db",
                            str(db), timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]
        trials = Store(db).trials(suite_id)
        assert [t["status"] for t in trials] == ["passed", "passed"], [(t["status"], t["reason"]) for t in trials]
        parent = docker_engine.images.get(tag).id
        derived = {i.id for i in docker_engine.images.list(name="agentmeter-user") if i.attrs.get("Parent") == parent
                   or parent in " ".join(h.get("Id") or "" for h in i.history())}
    finally:
        for image in (*derived, tag):
            docker_engine.images.remove(image, force=True)
