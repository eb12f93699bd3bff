"""The ``differential`` verifier kind: task.toml settings, verdicts through a sandbox session,
and the cli-tools suite (oracles, cases up to date with their schemas, scripted right and
wrong tools)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agentmeter_tui.core.difftest.cases import CaseFile, load_cases, save_cases
from agentmeter_tui.core.difftest.schema import load_schema
from agentmeter_tui.core.scripted.scenario import load_scenario
from agentmeter_tui.core.sandboxes.base import TrialSlot
from agentmeter_tui.core.suites.load import load_suite, load_task
from agentmeter_tui.core.tomlerrors import InputError
from agentmeter_tui.core.verifiers import VERIFIERS
from agentmeter_tui.core.verifiers.differential import DifferentialVerifier

SUITE = Path(__file__).resolve().parents[2] / "suites" / "cli-tools"
TASKS = ("file-sweeper", "kv-store", "text-stats")


class FolderSession:
    """Just enough of a sandbox session: the agent's finished workspace is a local folder."""

    def __init__(self, workspace: Path):
        self.workspace = str(workspace)

    async def collect_workspace(self, dest: Path) -> Path:
        return Path(self.workspace)


def small_task(tmp_path: Path, name: str = "file-sweeper", per_class: int = 4, verifier_extra: str = "") -> Path:
    """A copy of a cli-tools task with the first cases of each class only (fast)."""
    task = tmp_path / name
    shutil.copytree(SUITE / name, task, ignore=shutil.ignore_patterns("scenarios"))
    cases = load_cases(task / "tests" / "cases.json")
    trimmed = CaseFile(**{**cases.model_dump(), "classes": [
        {**cls.model_dump(), "cases": [c.model_dump() for c in cls.cases[:per_class]]} for cls in cases.classes]})
    save_cases(trimmed, task / "tests" / "cases.json")
    if verifier_extra:
        toml = task / "task.toml"
        toml.write_text(toml.read_text() + verifier_extra)
    return task


def test_registered_and_settings_validated_on_load(tmp_path):
    assert VERIFIERS.get("differential") is DifferentialVerifier
    task = load_task(small_task(tmp_path))
    settings = DifferentialVerifier(task).settings
    assert settings.metric == "fuzzy" and settings.pass_threshold == 1.0 and settings.judge is None
    assert settings.run == "{python} -S {tool}/sweep.py"


@pytest.mark.parametrize("line, field, message", [
    ('metric = "bogus"', "verifier.metric", "Input should be"),
    ('bogus = 1', "verifier.bogus", "unknown field"),
    ('metric = "semantic"', "verifier", "needs a 'judge' command"),
    ('command = "sh tests/test.sh"', "verifier", "not 'command'"),
    ('pass_threshold = 2', "verifier.pass_threshold", "less than or equal to 1"),
])
def test_bad_settings_name_file_line_and_field(tmp_path, line, field, message):
    folder = small_task(tmp_path)
    toml = folder / "task.toml"
    text = toml.read_text()
    text = "\n".join(row for row in text.splitlines() if not row.startswith(line.split(" =")[0] + " ="))
    toml.write_text(text.replace('kind = "differential"', f'kind = "differential"\n{line}'))
    with pytest.raises(InputError) as info:
        load_task(folder)
    assert info.value.field == field and message in info.value.message
    assert info.value.path.endswith("task.toml")
    if field != "verifier":
        assert toml.read_text().splitlines()[info.value.line - 1].startswith(line.split(" =")[0])


async def test_verdicts_through_a_session(tmp_path):
    task = load_task(small_task(tmp_path))
    verifier = DifferentialVerifier(task)
    oracle = task.path / "tests" / "oracle"
    result = await verifier.verify(FolderSession(oracle))
    assert result.passed and result.quality == 1.0 and result.infra_error is None
    assert result.details["scores"]["exact"] == 1.0
    assert "Fuzzy    100.0%  <- R" in result.output
    empty = tmp_path / "empty-workspace"
    empty.mkdir()
    result = await verifier.verify(FolderSession(empty))
    assert not result.passed and result.quality == 0.0 and result.infra_error is None
    assert result.details["build"]["candidate"]["ok"] is False
    assert "Build    FAILED" in result.output


async def test_our_failures_are_infra_errors(tmp_path):
    folder = small_task(tmp_path)
    (folder / "tests" / "oracle" / "sweep.py").write_text("def broken(:\n")
    result = await DifferentialVerifier(load_task(folder)).verify(FolderSession(SUITE / "file-sweeper"))
    assert result.infra_error and "oracle does not install" in result.infra_error
    (folder / "tests" / "cases.json").write_text("{not json")
    result = await DifferentialVerifier(load_task(folder)).verify(FolderSession(SUITE / "file-sweeper"))
    assert result.infra_error and "bad case file" in result.infra_error


def test_the_suite_loads_and_its_cases_match_their_schemas():
    suite = load_suite(SUITE)
    assert [t.id for t in suite.tasks] == list(TASKS)
    assert [t.tier for t in suite.tasks] == ["easy", "medium", "hard"]
    sizes = []
    for task in suite.tasks:
        assert task.verifier.kind == "differential"
        cases = load_cases(task.path / "tests" / "cases.json")
        _, sha = load_schema(task.path / "tests" / "schema.toml")
        assert cases.schema_sha256 == sha, f"{task.id}: regenerate the cases (difftest gen)"
        assert cases.oracle_checked
        assert all(any(c.oracle_exit == 0 for c in cls.cases) for cls in cases.classes), task.id
        assert max(len(cls.cases) for cls in cases.classes) == 50
        oracle = next((task.path / "tests" / "oracle").glob("*.py"))
        sizes.append(len(oracle.read_text().splitlines()))
        assert "oracle" not in task.instruction.lower()
    assert sizes == sorted(sizes)  # tasks of growing size


def scenario_tool(task: str, model: str, workspace: Path) -> None:
    """Play the scenario's first shell command (the heredoc that writes the tool)."""
    scenario = load_scenario(SUITE / task / "scenarios" / f"{model}.toml")
    subprocess.run(["/bin/sh", "-c", scenario.turns[0].shell], cwd=workspace, check=True)


@pytest.mark.parametrize("task", TASKS)
async def test_scripted_builder_passes_and_bungler_fails(tmp_path, task):
    verifier = DifferentialVerifier(load_task(small_task(tmp_path, task, per_class=6)))
    verdicts = {}
    for model in ("builder", "bungler"):
        workspace = tmp_path / model
        workspace.mkdir()
        scenario_tool(task, model, workspace)
        verdicts[model] = await verifier.verify(FolderSession(workspace))
    assert verdicts["builder"].passed and verdicts["builder"].quality == 1.0
    assert not verdicts["bungler"].passed and verdicts["bungler"].quality < 0.9
    scores = verdicts["bungler"].details["scores"]
    if task == "text-stats":
        assert scores["build"] == 0.0  # does not compile
    else:
        assert scores["exec"] > 0.9 and scores["side_effects"] < 0.9  # runs fine, leaves the wrong files


class SlotSession(FolderSession):
    def __init__(self, workspace: Path, sandbox: str):
        super().__init__(workspace)
        self.slot = TrialSlot(sandbox)


async def test_a_sandbox_without_executor_never_runs_the_tool_here_unless_the_task_says_so(tmp_path):
    tool = tmp_path / "ran-here"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    # A candidate that leaves a mark on this machine if it is ever built here.
    (workspace / "sweep.py").write_text(f"open({str(tool)!r}, 'w').close()\n")
    task = load_task(small_task(tmp_path, per_class=1, verifier_extra=""))
    result = await DifferentialVerifier(task).verify(SlotSession(workspace, "vm"))
    assert result.infra_error and 'run_on = "runner"' in result.infra_error
    assert not tool.exists()
    task = load_task(small_task(tmp_path / "explicit", per_class=1))
    toml = task.path / "task.toml"
    toml.write_text(toml.read_text().replace('kind = "differential"', 'kind = "differential"\nrun_on = "runner"'))
    result = await DifferentialVerifier(load_task(task.path)).verify(SlotSession(workspace, "vm"))
    assert result.infra_error is None and not result.passed
    assert tool.exists()  # built and run here, as the task asked
