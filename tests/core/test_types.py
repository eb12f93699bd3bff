"""The package type-checks under mypy at the settings in pyproject.toml ([tool.mypy], default
strictness plus the pydantic plugin; see docs/testing.md "Type checking"), with no error: a
change that brings one fails here, in CI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_mypy_reports_no_error():
    done = subprocess.run([sys.executable, "-m", "mypy", "agentmeter_tui"], cwd=ROOT,
                          capture_output=True, text=True)
    if "No module named mypy" in done.stderr:
        pytest.fail("mypy is not installed: it is in the test extra (pip install -e '.[test]')")
    assert done.returncode == 0 and "Success: no issues found" in done.stdout, done.stdout + done.stderr
