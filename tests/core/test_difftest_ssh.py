"""The differential verifier's ssh sides against a real sshd on 127.0.0.1: an ssh trial's tool is
built and run in a folder of the trial's host (under a network namespace where the host allows
one) and judged exactly as on this machine; the side's folder is gone afterwards."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys

import pytest

from agentmeter_tui.core.difftest.oracle import clear_oracle_cache
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites import load_task
from agentmeter_tui.core.verifiers.differential import DifferentialVerifier
from tests.conftest import need
from tests.core.sshd_support import SshdInstance, sshd_available
from tests.core.test_difftest_docker import trim_cases
from tests.core.test_difftest_verifier import SUITE, scenario_tool

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


def test_cli_tools_on_an_ssh_host_judge_like_this_machine(tmp_path, db):
    need(sshd_available(), "sshd and ssh-keygen are needed, as root")
    sshd = SshdInstance(tmp_path / "host").start()
    try:
        suite = tmp_path / "suite"
        shutil.copytree(SUITE, suite)
        trim_cases(suite / "kv-store", 4)
        suite_id = f"difftest-ssh-{tmp_path.name[-12:]}"
        text = re.sub(r'(?m)^id = "cli-tools"', f'id = "{suite_id}"', (suite / "suite.toml").read_text(), count=1)
        text = text.replace('tasks = ["file-sweeper", "kv-store", "text-stats"]', 'tasks = ["kv-store"]')
        (suite / "suite.toml").write_text(text + "\n[sandbox]\n" + sshd.sandbox_toml())
        result = subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless",
                                 "--db", str(db)], capture_output=True, text=True, timeout=900, check=False)
        assert result.returncode == 0, result.stderr + result.stdout
        trials = Store(db).trials(suite_id)
        assert len(trials) == 2 and {t["sandbox"] for t in trials} == {"ssh"}
        clear_oracle_cache()
        for trial in trials:
            details = json.loads(trial["extra"])["verifier"]
            workspace = tmp_path / trial["model"]
            workspace.mkdir()
            scenario_tool("kv-store", trial["model"], workspace)
            local = asyncio.run(DifferentialVerifier(load_task(suite / "kv-store")).judge_folder(workspace))
            assert details["scores"] == local.details["scores"], trial["model"]
            assert details["classes"] == local.details["classes"]
        assert {(t["model"], t["status"]) for t in trials} == {("builder", "passed"), ("bungler", "failed")}
        assert list(sshd.work_root.iterdir()) == []  # trial folders and both sides' folders removed
    finally:
        sshd.stop()
