"""The fixed-seed subset of the fault matrix (benchmarks/fault_matrix.py --ci): burners killed
by the operator and by each budget at random moments, and the runner SIGKILLed mid-run and
restarted; every cell must survive with nothing lost."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_fixed_seed_fault_matrix_loses_nothing():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fault_matrix.py"), "--ci"],
                            capture_output=True, text=True, timeout=1800, check=False)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    cells = [line for line in lines[1:] if not line.startswith("total")]
    assert len(cells) == 5 and all(line.endswith("lost 0") for line in cells), result.stdout
    total = lines[-1].split()
    assert total[0] == "total" and total[2] == total[5] and int(total[2]) >= 10, result.stdout
