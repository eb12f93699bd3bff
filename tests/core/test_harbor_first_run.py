"""A Harbor dataset's first run (issue 24, item 10): task images are built with their progress
shown (headless output, `agentmeter images build`), never taken for a dead runner; the do-nothing
agent `nop` fails every task. Images are built locally FROM agentmeter/host-bash (no registry)."""

from __future__ import annotations

import os

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES
from tests.conftest import agentmeter
from tests.core.harbor_support import harbor_suite, run
from tests.core.sandbox_support import docker_engine_fixture, leftovers  # noqa: F401 - a fixture

pytestmark = pytest.mark.docker


def test_nop_agent_fails_every_task(tmp_path, db, docker_engine):
    suite, suite_id = harbor_suite(tmp_path, "nop")
    trials = run(suite, db)
    assert {task for task, _ in trials} == {"count", "greet", "probe", "no-solution"}
    for trial in trials.values():
        assert (trial["cli"], trial["status"], trial["passed"], trial["quality"]) == ("nop", "failed", 0, 0.0), trial
        assert sum(trial[c] for c in TOKEN_CLASSES) == 0  # no model: zero tokens
    assert leftovers(docker_engine, suite_id, db) == {}


def fresh_image_suite(tmp_path) -> tuple:
    """The oracle suite with greet's image made new (a unique layer), so it is built in this test."""
    suite, suite_id = harbor_suite(tmp_path, "oracle")
    dockerfile = tmp_path / "harbor" / "tasks" / "greet" / "environment" / "Dockerfile"
    mark = os.urandom(6).hex()
    dockerfile.write_text(dockerfile.read_text() + f"RUN echo {mark} > /etc/agentmeter-test-mark\n")
    return suite, suite_id, mark


def remove_test_images(client, mark: str) -> None:
    for image in client.images.list(filters={"label": "agentmeter.image=1"}):
        if any(tag.startswith("agentmeter-task/greet:") for tag in image.tags):
            history = " ".join(h.get("CreatedBy") or "" for h in image.history())
            if mark in history:
                client.images.remove(image.id, force=True)


def test_image_builds_are_shown_step_by_step_in_the_headless_run(tmp_path, db, docker_engine):
    suite, suite_id, mark = fresh_image_suite(tmp_path)
    try:
        result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=900)
        assert result.returncode == 0, result.stderr + result.stdout
        out = result.stdout
        assert "did not answer" not in result.stderr
        assert "preparing: task images on local: 1/4" in out, out
        assert "preparing: building the image of task greet: Step 1/" in out, out
        assert f"RUN echo {mark}" in out  # the step being built, as docker tells it
        assert len(Store(db).trials(suite_id, "status = 'passed'")) == 3
    finally:
        remove_test_images(docker_engine, mark)


def test_images_build_ahead_then_the_run_builds_nothing(tmp_path, db, docker_engine):
    suite, suite_id, mark = fresh_image_suite(tmp_path)
    try:
        built = agentmeter("images", "build", str(suite), timeout=900)
        assert built.returncode == 0, built.stderr
        assert "building the image of task greet: Step 1/" in built.stdout
        assert f"4 of 4 task image(s) of suite {suite_id} ready" in built.stdout
        result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=900)
        assert result.returncode == 0, result.stderr
        assert "building the image" not in result.stdout  # built ahead: the run only finds it
        assert leftovers(docker_engine, suite_id, db) == {}
    finally:
        remove_test_images(docker_engine, mark)
