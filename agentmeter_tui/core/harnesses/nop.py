"""The do-nothing agent, Harbor's ``nop``: the check that a dataset's tests fail when nothing
is done (a task whose tests pass untouched measures nothing).

``[[clis]] adapter = "nop"`` starts no CLI and calls no model: the trial's agent is a shell
that exits at once, in the task's sandbox like any agent, and the verifier then judges the
untouched workspace. Zero tokens, zero cost. Beside ``oracle`` (the task's own solution), the
two bracket a dataset: the oracle must pass every task, nop must fail every one.
"""

from __future__ import annotations

from pathlib import Path

from .base import HarnessAdapter, InstallSpec, LaunchContext
from .oracle import OracleParser


class NopAdapter(HarnessAdapter):
    name = "nop"
    protocol = "chat"  # unused: nop calls no model
    install = InstallSpec("bundled", "agentmeter-nop", "1", "sh")
    needs_model = False

    def is_installed(self, clis_root: Path) -> bool:
        return True

    def command(self, ctx: LaunchContext) -> list[str]:
        return ["sh", "-c", "exit 0"]

    def new_parser(self) -> OracleParser:
        return OracleParser()  # whatever a shell that does nothing prints: kept as plain lines
