"""A one-task suite of fake agents run through the whole engine, for the load benchmarks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SUITE = """
[suite]
id = "{suite_id}"
trials = {trials}
concurrency = {concurrency}
[[models]]
id = "none"
provider = "offline"
[providers.offline]
kind = "none"
[[clis]]
adapter = "command"
args = {args}
"""


def write_suite(folder: Path, suite_id: str, *, trials: int, concurrency: int, args: list[str],
                verifier: str = '[verifier]\nkind = "none"\n') -> Path:
    """``trials`` trials of one task whose agent is the program ``args`` (the command adapter)."""
    suite = folder / "suite"
    (suite / "task").mkdir(parents=True)
    (suite / "suite.toml").write_text(SUITE.format(suite_id=suite_id, trials=trials, concurrency=concurrency,
                                                   args=json.dumps(args)))
    (suite / "task" / "task.toml").write_text(verifier)
    (suite / "task" / "instruction.md").write_text("Print something.\n")
    return suite


def run_headless(suite: Path, db: Path) -> None:
    subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db", str(db)],
                   check=True, stdout=subprocess.DEVNULL)
