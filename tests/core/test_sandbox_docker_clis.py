"""A real agent CLI in a container: Codex's static musl binary (mounted read-only from the
CLIs root, no node in the image) against the scripted model server, through the relay of the
isolated network; its side effect is verified inside the container."""

from __future__ import annotations

import pytest

from tests.core.sandbox_support import docker_engine_fixture  # noqa: F401
from tests.e2e import cases
from tests.e2e.harness import run_scenario

pytestmark = [pytest.mark.docker, pytest.mark.clis, pytest.mark.slow]
DOCKER = 'wall_seconds = 120\n\n[sandbox]\nkind = "docker"\n'


def test_codex_runs_in_a_container(tmp_path, docker_engine):
    result = run_scenario(tmp_path, "codex", cases.WRITE_FILE, instruction="Create out.txt containing hi.",
                          test_sh=cases.CHECK_FILE, budget=DOCKER)
    row = result.row
    assert row["sandbox"] == "docker" and row["workspace"] == "/agentmeter/workspace", row
    assert row["status"] == "passed", (row["reason"], row["verifier_output"], result.stderr[-2000:])
    assert {"tool_call", "tool_result", "assistant"} <= set(cases.kinds(result))
    assert result.usage == result.served  # every token class the server served was counted
