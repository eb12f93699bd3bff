"""User-visible names that issue 33's renames kept working: the scripted server's command line
under its old package name and its old CLI command (docs/architecture.md, "Glossary")."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", [["-m", "agentmeter_tui.core.mockllm"], ["-m", "agentmeter_tui.cli", "mockllm"]],
                         ids=["python -m old package", "agentmeter mockllm"])
def test_the_old_names_still_start_the_scripted_server(command):
    result = subprocess.run([sys.executable, *command, "serve", "--help"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--scenario" in result.stdout
