"""The oracle: a task's own ``solution/solve.sh`` run as the agent, the way Harbor users check
that a dataset is solvable before paying for models.

``[[clis]] adapter = "oracle"`` puts the task's ``solution/`` folder where the sandbox says
(``/solution`` in a Harbor task's container, as Harbor does; the trial's scratch folder
elsewhere) and runs ``bash solve.sh`` from the agent's working folder. It calls no model:
zero tokens, zero cost. Its output lines are the transcript. Like Harbor's oracle, the exit
code of solve.sh decides nothing; the verifier does. A task without ``solution/solve.sh``
fails that trial with the reason (:class:`TaskUnfit`); the run goes on.
"""

from __future__ import annotations

from pathlib import Path

from ..vocab import EventKind, ParsedEvent
from .base import AgentOutcome, HarnessAdapter, InstallSpec, LaunchContext, StreamParser, TaskUnfit


class OracleParser(StreamParser):
    def feed(self, stream: str, line: bytes) -> list[ParsedEvent]:
        return [ParsedEvent(EventKind.TOOL_RESULT, line.decode("utf-8", "replace")[:2000])]

    def outcome(self, exit_code: int | None, killed: bool) -> AgentOutcome:
        return AgentOutcome(False)


class OracleAdapter(HarnessAdapter):
    name = "oracle"
    # Runs a task's own solution/solve.sh: with no suite there is no task to check it against.
    checked_alone = False
    protocol = "chat"  # unused: the oracle calls no model
    install = InstallSpec("bundled", "agentmeter-oracle", "1", "bash")
    needs_model = False

    def is_installed(self, clis_root: Path) -> bool:
        return True

    def solution_files(self, task_path: Path) -> dict[str, bytes]:
        solution = task_path / "solution"
        if not (solution / "solve.sh").is_file():
            raise TaskUnfit(f"oracle: task folder {task_path.name} has no solution/solve.sh")
        return {str(p.relative_to(solution)): p.read_bytes() for p in sorted(solution.rglob("*")) if p.is_file()}

    def command(self, ctx: LaunchContext) -> list[str]:
        return ["bash", f"{ctx.solution_dir}/solve.sh"]

    def new_parser(self) -> OracleParser:
        return OracleParser()
