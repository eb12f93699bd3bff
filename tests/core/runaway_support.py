"""The runaway suite with its burner held at a gate (tests of budgets raised or held in time)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import FIXTURES

RUNAWAY = FIXTURES / "suites" / "runaway"


def gated_runaway(tmp_path: Path) -> Path:
    """A copy of the runaway suite whose burner waits for a file ``gate`` in its workspace
    before it burns (so a control request lands first however slow the machine is), with an
    hour's time budget (so only tokens can stop it)."""
    suite = tmp_path / "runaway"
    shutil.copytree(RUNAWAY, suite)
    burner_file = suite / "scenarios" / "burner.toml"
    burner_file.write_text('[[turns]]\nshell = "until [ -e gate ]; do sleep 0.05; done"\n'
                           'usage = { uncached_input = 100, output = 10 }\n' + burner_file.read_text()
                           .replace('description = "leaves a setsid background job behind, then burns tokens forever"',
                                    ""))
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text().replace("wall_seconds = 20",
                                                                                 "wall_seconds = 3600"))
    return suite
