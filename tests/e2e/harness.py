"""Run one task with one agent CLI against the scripted model server, as a real suite.

``run_scenario`` writes a one-task, one-model, one-CLI suite into a temp folder, runs it with
the real ``agentmeter run --headless`` (a real runner, the real CLI from ``.clis/``), and
returns the store and the trial row. The row's ``extra.scripted.usage`` is what the server
served, so a test can compare the CLI's normalized token classes with the ground truth.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

from agentmeter_tui.core.harnesses import ADAPTERS
from agentmeter_tui.core.paths import default_clis_root, runner_log_path
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES, TokenUsage
from tests.conftest import agentmeter, need, unwalled

PRICES = """as_of = "2026-11-01"
[models.mock]
input = "3"
cached_input = "0.3"
cache_write = "3.75"
output = "15"
"""

DEFAULT_TEST = "#!/bin/sh\nexit 0\n"


@dataclass
class TrialResult:
    store: Store
    row: dict
    stdout: str
    stderr: str

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage(*(int(self.row[c] or 0) for c in TOKEN_CLASSES))

    @property
    def served(self) -> TokenUsage:
        extra = json.loads(self.row["extra"] or "{}")
        return TokenUsage.from_dict(extra.get("scripted", {}).get("usage"))

    @property
    def extra(self) -> dict:
        return json.loads(self.row["extra"] or "{}")

    def events(self, kind: str | None = None) -> list[tuple]:
        rows = list(self.store.events(self.row["id"]))
        return [r for r in rows if kind is None or r[2] == kind]


def require_cli(name: str) -> None:
    adapter = ADAPTERS.get(name)()
    need(adapter.is_installed(default_clis_root()), f"{name} is not installed (agentmeter install-clis)")


def run_scenario(tmp_path: Path, cli: str, scenario: str, *, instruction: str = "Do the task.",
                 test_sh: str = DEFAULT_TEST, workspace: dict[str, str] | None = None,
                 budget: str = "wall_seconds = 120", model_name: str | None = None,
                 suite_extra: str = "", cli_args: list[str] | None = None, timeout: float = 240,
                 kill_grace: float = 3.0, unwalled_run: bool = False) -> TrialResult:
    require_cli(cli)
    suite = scenario_suite(tmp_path / "suite", cli, scenario, instruction=instruction, test_sh=test_sh,
                           workspace=workspace, budget=budget, model_name=model_name, suite_extra=suite_extra,
                           cli_args=cli_args, kill_grace=kill_grace, unwalled_run=unwalled_run)
    db = tmp_path / "e2e.db"
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=timeout)
    log = runner_log_path(db)
    assert result.returncode == 0, (f"run failed ({result.returncode}):\n{result.stderr}\n{result.stdout}\n"
                                    f"runner log:\n{log.read_text(errors='replace') if log.exists() else '(none)'}")
    store = Store(db)
    (row,) = store.trials(f"e2e-{cli}")
    return TrialResult(store, row, result.stdout, result.stderr)


def scenario_suite(suite: Path, cli: str, scenario: str, *, instruction: str = "Do the task.",
                   test_sh: str = DEFAULT_TEST, workspace: dict[str, str] | None = None,
                   budget: str = "wall_seconds = 120", model_name: str | None = None, suite_extra: str = "",
                   cli_args: list[str] | None = None, kill_grace: float = 3.0, unwalled_run: bool = False) -> Path:
    """The folder ``suite``: one task, the model ``mock`` on the scripted server, one CLI."""
    task = suite / "task"
    (task / "tests").mkdir(parents=True)
    (suite / "scenarios").mkdir()
    cli_names = f'cli_names = {{ "{cli}" = "{model_name}" }}\n' if model_name else ""
    (suite / "suite.toml").write_text(textwrap.dedent(f"""\
        [suite]
        id = "e2e-{cli}"
        pricing = "prices.toml"
        kill_grace = {kill_grace}
        {suite_extra}
        [[models]]
        id = "mock"
        {cli_names}
        [[clis]]
        adapter = "{cli}"
        args = {json.dumps(cli_args or [])}

        [budgets.default]
        {budget}
        """))
    if unwalled_run:
        unwalled(suite)
    (suite / "prices.toml").write_text(PRICES)
    (suite / "scenarios" / "mock.toml").write_text(scenario)
    (task / "task.toml").write_text('[verifier]\ntimeout_sec = 30\n')
    (task / "instruction.md").write_text(instruction + "\n")
    (task / "tests" / "test.sh").write_text(test_sh)
    for rel, text in (workspace or {}).items():
        path = task / "workspace" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return suite
