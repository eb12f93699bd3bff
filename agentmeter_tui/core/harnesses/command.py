"""Adapter for any program that speaks the reference agent's JSONL events.

``[[clis]] adapter = "command"`` with ``args = ["prog", "arg", ...]`` (``{python}`` and ``{suite}``
are replaced by the runner's Python and the suite folder) runs that program in the
workspace with the instruction in ``$AGENTMETER_INSTRUCTION`` (and the provider's address in
``$REFAGENT_BASE_URL`` / ``$REFAGENT_API_KEY``). Lines in the reference format become events;
anything else is kept verbatim as raw events. Useful for home-grown agents, and for load
and robustness tests that need a process printing exactly what they choose.
"""

from __future__ import annotations

from pathlib import Path

from .base import HarnessAdapter, InstallSpec, LaunchContext
from .reference import ReferenceAdapter, ReferenceParser


class CommandAdapter(HarnessAdapter):
    name = "command"
    protocol = "chat"
    install = InstallSpec("bundled", "agentmeter-command", "0", "")
    checked_alone = False  # runs whatever program a suite names: nothing to check without one

    def is_installed(self, clis_root: Path) -> bool:
        return True

    def command(self, ctx: LaunchContext) -> list[str]:
        if not ctx.extra_args:
            raise ValueError("the command adapter needs the program to run in the CLI entry's args")
        return [arg.replace("{python}", ctx.python).replace("{suite}", ctx.suite_dir) for arg in ctx.extra_args]

    def environment(self, ctx: LaunchContext) -> dict[str, str]:
        return {**ReferenceAdapter().environment(ctx), "AGENTMETER_INSTRUCTION": ctx.instruction,
                "AGENTMETER_MODEL": ctx.model_name}

    def new_parser(self) -> ReferenceParser:
        return ReferenceParser()
