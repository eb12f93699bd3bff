"""No unused import, unknown name or unused local in the package, its tests, benchmarks and
scripts (ruff's pyflakes rules F401, F821, F841). Merges of parallel branches have shadowed and
dropped names before: an import left behind by one side, a name the other side removed.
F811 (redefinition) is not asked: pytest fixtures imported into a test module and taken as
arguments look like redefinitions to it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

RULES = "F401,F821,F841"


def ruff() -> str:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: it is in the test extra (pip install -e '.[test]')")
    return found


def test_no_unused_import_unknown_name_or_unused_local():
    done = subprocess.run([ruff(), "check", "--no-cache", "--select", RULES, "--output-format", "concise",
                           "agentmeter_tui", "tests", "benchmarks", "scripts"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_bites(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\n\ndef f():\n    unused = 1\n    return missing\n")
    done = subprocess.run([ruff(), "check", "--no-cache", "--select", RULES, "--output-format", "concise",
                           str(planted)], capture_output=True, text=True)
    assert done.returncode == 1
    for rule in ("F401", "F841", "F821"):
        assert rule in done.stdout, done.stdout
