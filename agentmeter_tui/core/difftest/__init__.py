"""Black-box differential testing of CLI tools (seed 001, CLI-Tool-Bench).

- :mod:`.schema`: the command schema a task author declares (TOML);
- :mod:`.generate`: unrolls it into command classes and derives cases, filtered by the oracle;
- :mod:`.cases`: the case file (JSON) the verifier reads;
- :mod:`.snapshot`: workspace snapshots and side-effect diffs, hidden paths ignored;
- :mod:`.executor`: builds one side (oracle or candidate) and runs cases in fresh workspaces;
- :mod:`.funnel`: Build -> Exec -> SideFx -> Exact -> Fuzzy -> Semantic, macro-averaged per class;
- :mod:`.evaluate`: runs both sides and scores the funnel; :mod:`.report`: its readable text.
"""

from __future__ import annotations

from .cases import Case, CaseFile, CommandClass, FileSpec, load_cases, save_cases
from .evaluate import CommandJudge, OracleError, evaluate
from .executor import BuildResult, CaseExecutor, CaseRun, LocalExecutor, ToolCommand
from .funnel import FunnelReport
from .report import render_text
from .snapshot import SideEffects, snapshot

__all__ = [
    "BuildResult", "Case", "CaseExecutor", "CaseFile", "CaseRun", "CommandClass", "CommandJudge", "FileSpec",
    "FunnelReport", "LocalExecutor", "OracleError", "SideEffects", "ToolCommand", "evaluate", "load_cases",
    "render_text", "save_cases", "snapshot",
]
