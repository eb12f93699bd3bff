"""Each benchmark that checks the store after its run has that check run here on a small size,
so a new kind of runner event (or any other change of what a trial stores) cannot make the
check stale unseen: issue 33 found `benchmarks/paper_grid.py` reporting one "problem" per trial
after the runner's containment note was added. Figures are not asserted (they are the
benchmark's business); only the check's verdict is."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_the_paper_grid_store_check_passes_on_a_small_clean_run():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "paper_grid.py"), "--tasks", "3",
                             "--trials", "1", "--concurrency", "4"],
                            capture_output=True, text=True, timeout=600, check=False)
    assert "store check: every trial final once, every event count right" in result.stdout, \
        result.stdout + result.stderr
    assert result.returncode == 0


def test_the_flood_store_check_passes_on_a_short_flood():
    """flood.py hung on its own gate once the local sandbox hid the script's folder from the
    watching agent: its own check (every numbered line stored once, in order) never ran."""
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "flood.py"), "--seconds", "4"],
                            capture_output=True, text=True, timeout=600, check=False)
    assert "(0 out of order, 0 missing)" in result.stdout, result.stdout + result.stderr
    assert result.returncode == 0
