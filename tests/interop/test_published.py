"""Harbor trial folders another team published (SkillsBench), imported exactly.

tests/fixtures/harbor-published/SOURCE.md names each file's repository, path and commit. Every
expected figure here is read from those raw files with plain JSON parsing, never through the
importer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TokenUsage
from tests.conftest import FIXTURES
from tests.interop.support import cli

PUBLISHED = FIXTURES / "harbor-published"
GEMINI_JOB = PUBLISHED / "gemini-cli-gemini3flash-noskills-powerlifting-coef-calc-98910f"
CLAUDE_JOB = PUBLISHED / "claude-code-claude-opus-4-5-skills-citation-check-229ca9"


def raw(path: Path) -> dict:
    return json.loads(path.read_text())


def gemini_steps_expected(trajectory: dict) -> TokenUsage:
    """Gemini CLI's steps as Harbor's writer made them: completion = output + thoughts + tool,
    prompt includes the cached tokens; tool-use prompt tokens are input."""
    metrics = [s["metrics"] for s in trajectory["steps"] if "metrics" in s]
    thoughts = sum(m["extra"]["thoughts_tokens"] for m in metrics)
    tool = sum(m["extra"]["tool_tokens"] for m in metrics)
    prompt = sum(m["prompt_tokens"] for m in metrics)
    cached = sum(m["cached_tokens"] for m in metrics)
    completion = sum(m["completion_tokens"] for m in metrics)
    return TokenUsage(uncached_input=prompt - cached + tool, cached_input=cached, output=completion - thoughts - tool,
                      reasoning=thoughts)


def one_trial(db: Path, job: Path, expect_code: int = 0) -> tuple[dict, str]:
    code, err = cli("import", "harbor", str(job), "--db", str(db))
    assert code == expect_code, err
    (row,) = Store(db).trials(f"harbor-{job.name}")
    return row, err


def test_gemini_cli_reasoning_per_step_is_kept(db):
    (trial,) = GEMINI_JOB.glob("*__*")
    result, trajectory = raw(trial / "result.json"), raw(trial / "agent" / "trajectory.json")
    assert trajectory["schema_version"] == "ATIF-v1.2" and "extra" not in trajectory["final_metrics"]
    expected = gemini_steps_expected(trajectory)
    assert expected.reasoning > 0  # the case: final_metrics states no reasoning, the steps do
    row, _ = one_trial(db, GEMINI_JOB)
    assert TokenUsage.from_dict(row) == expected
    # result.json's totals agree with the trajectory's: the finer split is used.
    agent = result["agent_result"]
    assert expected.raw == agent["n_input_tokens"] + agent["n_output_tokens"]
    assert row["usage_source"] == "harbor+atif"
    assert (row["status"], row["quality"]) == ("passed", result["verifier_result"]["rewards"]["reward"])
    assert (row["cli"], row["model"]) == ("gemini-cli", result["config"]["agent"]["model_name"])
    # Each step's reasoning is on its own usage row, as the step states it.
    per_step = [s["metrics"]["extra"]["thoughts_tokens"] for s in trajectory["steps"] if "metrics" in s]
    usage = Store(db).usage_by_seq(row["id"])
    assert [u["reasoning"] for _seq, u in sorted(usage.items())] == per_step


def test_gemini_cli_trajectory_alone_imports_the_same_split(db):
    (path,) = GEMINI_JOB.glob("*__*/agent/trajectory.json")
    code, err = cli("import", "atif", str(path), "--db", str(db))
    assert code == 0, err
    (row,) = Store(db).trials("atif")
    assert TokenUsage.from_dict(row) == gemini_steps_expected(raw(path))
    assert row["usage_source"] == "atif:steps"


def test_claude_code_log_gives_the_stated_cost_and_the_tokens_result_json_lacks(db):
    (trial,) = CLAUDE_JOB.glob("*__*")
    result = raw(trial / "result.json")
    agent = result["agent_result"]
    assert agent["n_input_tokens"] is None and agent["cost_usd"] is None  # Bedrock: Harbor recorded nothing
    lines = [json.loads(line) for line in (trial / "agent" / "claude-code.txt").read_text().splitlines()]
    (final,) = [e for e in lines if e["type"] == "result"]
    # Claude Code's modelUsage covers every model it used (the main one and a background Haiku);
    # inputTokens excludes the cache (Anthropic's convention); thinking is inside output.
    models = final["modelUsage"].values()
    expected = TokenUsage(uncached_input=sum(m["inputTokens"] for m in models),
                          cached_input=sum(m["cacheReadInputTokens"] for m in models),
                          cache_write=sum(m["cacheCreationInputTokens"] for m in models),
                          output=sum(m["outputTokens"] for m in models))
    row, _ = one_trial(db, CLAUDE_JOB)
    assert TokenUsage.from_dict(row) == expected
    assert row["usage_source"] == "harbor:agent-log"
    assert (row["cost_actual_usd"], row["cost_actual_source"]) == (final["total_cost_usd"], "harbor:agent-log")
    assert json.loads(row["extra"])["harbor"]["transcript_from"] == ["agent/claude-code.txt"]
    assert (row["status"], row["passed"]) == ("passed", 1)


@pytest.mark.parametrize("damage", ["a list", "truncated"])
def test_a_trajectory_we_cannot_read_keeps_the_trial(db, tmp_path, damage):
    # No real Terminus-2 legacy file (a list of episodes) was found published; the same failure
    # is made from the real trial: its trajectory becomes a JSON list (its steps), or is cut short.
    job = tmp_path / GEMINI_JOB.name
    shutil.copytree(GEMINI_JOB, job)
    (path,) = job.glob("*__*/agent/trajectory.json")
    data = path.read_text()
    path.write_text(json.dumps(json.loads(data)["steps"]) if damage == "a list" else data[: len(data) // 2])
    row, err = one_trial(db, job, expect_code=1)
    assert "trajectory.json: not read" in err and "the trial is imported without it" in err
    result = raw(next(job.glob("*__*/result.json")))
    agent = result["agent_result"]
    assert TokenUsage.from_dict(row) == TokenUsage(uncached_input=agent["n_input_tokens"] - agent["n_cache_tokens"],
                                                   cached_input=agent["n_cache_tokens"],
                                                   output=agent["n_output_tokens"])
    assert (row["status"], row["usage_source"]) == ("passed", "harbor")
    (note,) = json.loads(row["extra"])["harbor"]["not_read"]
    assert note.startswith("agent/trajectory.json: ")
    texts = [e[4] for e in Store(db).events(row["id"])]
    assert texts == [f"not read: {note}"]


FOLD = """
import json, sys
from harbor.agents.installed.codex import Codex
from harbor.models.trajectories import Trajectory
parent = Trajectory.model_validate_json(open(sys.argv[1], "rb").read())
child = Trajectory.model_validate_json(open(sys.argv[2], "rb").read())
child.trajectory_id = "terminus-child"
parent.schema_version, parent.trajectory_id, parent.subagent_trajectories = "ATIF-v1.7", "gemini-parent", [child]
Codex._include_subagent_metrics(parent, [child])  # Harbor's own writer folds the children's totals in
sys.stdout.write(json.dumps(parent.to_json_dict(), indent=2))
"""


def test_a_subagent_trajectory_is_read_and_counted_once(db, tmp_path):
    # No ATIF-v1.7 file with subagent_trajectories from a real run was found published. This one
    # is made by Harbor's own code (harbor 0.26.0: Codex._include_subagent_metrics, what its codex
    # agent writes for sub-agents) from two real trajectories: the published Gemini CLI one as the
    # parent, and a terminus-2 one from a real `harbor run` here (tests/fixtures/harbor-jobs) as its child.
    import subprocess

    from tests.conftest import FIXTURES as ALL
    from tests.interop.support import harbor_python

    (parent,) = GEMINI_JOB.glob("*__*/agent/trajectory.json")
    (child,) = (ALL / "harbor-jobs" / "jobs" / "terminus-solve").glob("hello__*/agent/trajectory.json")
    made = subprocess.run([str(harbor_python()), "-c", FOLD, str(parent), str(child)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert made.returncode == 0, made.stderr
    path = tmp_path / "trajectory.json"
    path.write_text(made.stdout)
    folded = raw(path)
    child_raw = raw(child)
    child_metrics = [s["metrics"] for s in child_raw["steps"] if "metrics" in s]
    child_usage = TokenUsage(uncached_input=sum(m["prompt_tokens"] - (m.get("cached_tokens") or 0) for m in child_metrics),
                             cached_input=sum(m.get("cached_tokens") or 0 for m in child_metrics),
                             output=sum(m["completion_tokens"] for m in child_metrics))
    expected = gemini_steps_expected(raw(parent)) + child_usage
    # Harbor's parent total already holds the child's: counting both would count the child twice.
    assert folded["final_metrics"]["total_prompt_tokens"] == (raw(parent)["final_metrics"]["total_prompt_tokens"]
                                                              + child_raw["final_metrics"]["total_prompt_tokens"])
    code, err = cli("import", "atif", str(path), "--db", str(db))
    assert code == 0, err
    (row,) = Store(db).trials("atif")
    assert TokenUsage.from_dict(row) == expected
    texts = [e[4] for e in Store(db).events(row["id"])]
    marker = texts.index(f"subagent terminus-child (terminus-2): {len(child_raw['steps'])} step(s)")
    calls = [c["function_name"] for s in child_raw["steps"] for c in s.get("tool_calls") or []]
    assert sum(1 for e in list(Store(db).events(row["id"]))[marker:] if e[2] == "tool_call") == len(calls)


def test_an_exported_trial_with_a_subagent_writes_subagent_trajectories(db, tmp_path):
    """Export (ATIF v1.7 and later): the sub-agent read in above goes back out as
    ``subagent_trajectories``, valid under Harbor's own model, its steps not the parent's, its
    tokens counted once (figures from the raw files); the file reads back to the same trial."""
    import subprocess

    from tests.conftest import FIXTURES as ALL
    from tests.interop.support import harbor_python, harbor_validate

    (parent,) = GEMINI_JOB.glob("*__*/agent/trajectory.json")
    (child,) = (ALL / "harbor-jobs" / "jobs" / "terminus-solve").glob("hello__*/agent/trajectory.json")
    made = subprocess.run([str(harbor_python()), "-c", FOLD, str(parent), str(child)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert made.returncode == 0, made.stderr
    source = tmp_path / "folded.json"
    source.write_text(made.stdout)
    assert cli("import", "atif", str(source), "--db", str(db))[0] == 0
    (row,) = Store(db).trials("atif")
    out = tmp_path / "out"
    code, err = cli("export", "atif", "--trial", str(row["id"]), "--out", str(out), "--db", str(db))
    assert code == 0, err
    (written,) = out.glob("trial-*/trajectory.json")
    assert harbor_validate([written]) == {str(written): None}
    exported, parent_raw, child_raw = raw(written), raw(parent), raw(child)
    (sub,) = exported["subagent_trajectories"]
    assert (sub["trajectory_id"], sub["agent"]["name"]) == ("terminus-child", child_raw["agent"]["name"])
    assert [s["step_id"] for s in sub["steps"]] == list(range(1, len(sub["steps"]) + 1))

    def calls(trajectory: dict) -> list[str]:
        return [c["function_name"] for s in trajectory["steps"] for c in s.get("tool_calls") or []]

    def prompt(trajectory: dict) -> int:
        return sum(s["metrics"]["prompt_tokens"] for s in trajectory["steps"] if "metrics" in s)

    assert calls(sub) == calls(child_raw) and calls(exported) == calls(parent_raw)
    assert prompt(sub) == prompt(child_raw) and prompt(exported) == prompt(parent_raw)
    assert sub["final_metrics"]["total_prompt_tokens"] == prompt(child_raw)
    # The parent's total holds the child's once, as Harbor's writer folded it.
    assert exported["final_metrics"]["total_prompt_tokens"] == raw(source)["final_metrics"]["total_prompt_tokens"]
    again = tmp_path / "again.db"
    assert cli("import", "atif", str(written), "--db", str(again))[0] == 0
    (back,) = Store(again).trials("atif")
    assert TokenUsage.from_dict(back) == TokenUsage.from_dict(row)
    assert [e[2:5] for e in Store(again).events(back["id"])] == [e[2:5] for e in Store(db).events(row["id"])]
