"""The core runs without a screen: importing it must not load Textual, rich, docker or asyncssh."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

CORE_MODULES = [
    "agentmeter_tui.core", "agentmeter_tui.core.run.runner", "agentmeter_tui.core.run.scheduler",
    "agentmeter_tui.core.store", "agentmeter_tui.core.suites", "agentmeter_tui.core.run.trial",
    "agentmeter_tui.core.pricing", "agentmeter_tui.core.records", "agentmeter_tui.core.harnesses",
    "agentmeter_tui.core.harnesses.reference", "agentmeter_tui.core.sandboxes",
    "agentmeter_tui.core.sandboxes.local", "agentmeter_tui.core.run.control",
]
FORBIDDEN = ("textual", "rich", "docker", "asyncssh")


def test_core_imports_no_ui_or_sdk():
    code = (
        "import importlib, json, sys\n"
        f"for name in {CORE_MODULES!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(json.loads(out.stdout))
    assert not loaded & set(FORBIDDEN), f"core loaded {sorted(loaded & set(FORBIDDEN))}"


def test_import_linter_contract():
    """The same rule as a static contract over every module (pyproject.toml [tool.importlinter])."""
    result = subprocess.run([sys.executable, "-m", "importlinter.cli", "--no-cache"], capture_output=True,
                            text=True, cwd=ROOT)
    if "No module named" in result.stderr:
        result = subprocess.run(["lint-imports", "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
