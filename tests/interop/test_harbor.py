"""``agentmeter import harbor`` on job folders written by a real ``harbor run`` (harbor 0.26.0,
offline: scripts/harbor_fixtures.sh made tests/fixtures/harbor-jobs/jobs/). Expected figures
come from those files (rewards, Harbor's cost) and from what the scripted server served
terminus-2 (tests/fixtures/harbor-jobs/scenarios/*.toml)."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.wire import fold
from tests.conftest import FIXTURES
from tests.interop.support import STREAMS, cli

SCENARIOS = FIXTURES / "harbor-jobs" / "scenarios"


def served(scenario: str) -> TokenUsage:
    turns = tomllib.loads((SCENARIOS / f"{scenario}.toml").read_text())["turns"]
    return sum((TokenUsage.from_dict(t["usage"]) for t in turns), TokenUsage())


def trial_result(job: Path, task: str) -> dict:
    (path,) = job.glob(f"{task}__*/result.json")
    return json.loads(path.read_text())


def imported(db: Path, job: Path, *args: str) -> dict[str, dict]:
    code, err = cli("import", "harbor", str(job), "--db", str(db), *args)
    assert code == 0, err
    return {r["task_id"]: r for r in Store(db).trials(f"harbor-{job.name}")}


def test_oracle_pass_fraction_and_agent_timeout(harbor_jobs, db):
    rows = imported(db, harbor_jobs / "oracle-mixed")
    assert (rows["hello"]["status"], rows["hello"]["passed"], rows["hello"]["quality"]) == ("passed", 1, 1.0)
    # reward.json {"reward": 0.5, "files": 1}: the reward key decides, both are kept
    assert (rows["half"]["status"], rows["half"]["passed"], rows["half"]["quality"]) == ("failed", 0, 0.5)
    assert json.loads(rows["half"]["extra"])["harbor"]["rewards"] == {"reward": 0.5, "files": 1.0}
    assert (rows["slow"]["status"], rows["slow"]["reason"]) == ("killed", "budget:time (AgentTimeoutError)")
    for task, row in rows.items():
        assert (row["cli"], row["model"], row["source"]) == ("oracle", "none", "harbor")
        result = trial_result(harbor_jobs / "oracle-mixed", task)
        assert (row["started_at"], row["finished_at"]) == (result["started_at"], result["finished_at"])
        assert TokenUsage.from_dict(row) == TokenUsage()  # the oracle calls no model
    assert "PASS" in rows["hello"]["verifier_output"]
    # A lower threshold (a suite may pass at 0.5): the fraction passes.
    assert imported(db.with_name("half.db"), harbor_jobs / "oracle-mixed", "--pass-threshold", "0.5")["half"][
        "passed"] == 1


def test_failing_and_errored_trials(harbor_jobs, db):
    nop = imported(db, harbor_jobs / "nop-fail")["hello"]
    assert (nop["status"], nop["quality"], nop["cli"]) == ("failed", 0.0, "nop")
    errored = imported(db, harbor_jobs / "oracle-errored")["no-solution"]
    assert (errored["status"], errored["reason"]) == ("errored", "FileNotFoundError")
    assert errored["error"].startswith("FileNotFoundError: Solution script not found")
    # The image build failed (RUN exit 3): Harbor says RuntimeError, before the agent started.
    broken = imported(db, harbor_jobs / "broken-env")["broken"]
    exception = trial_result(harbor_jobs / "broken-env", "broken")["exception_info"]["exception_type"]
    assert (broken["status"], broken["reason"]) == ("infra-invalid", exception)


PRICES = """as_of = "2026-11-01"
[models."openai/gpt-4o-mini"]
input = "0.15"
cached_input = "0.075"
output = "0.6"
"""


@pytest.mark.parametrize(("job", "status"), [("terminus-solve", "passed"), ("terminus-wrong", "failed")])
def test_terminus_tokens_cost_and_transcript(harbor_jobs, db, job, status, tmp_path):
    (tmp_path / "prices.toml").write_text(PRICES)
    row = imported(db, harbor_jobs / job, "--prices", str(tmp_path / "prices.toml"))["hello"]
    assert (row["status"], row["cli"], row["model"]) == (status, "terminus-2", "openai/gpt-4o-mini")
    # Harbor records no cache writes and no reasoning count: reasoning stays inside output.
    assert TokenUsage.from_dict(row) == fold(served(job.split("-")[1]), {"reasoning": "output"})
    assert row["usage_source"] in ("harbor", "harbor+atif")
    result = trial_result(harbor_jobs / job, "hello")
    assert row["cost_actual_usd"] == pytest.approx(result["agent_result"]["cost_usd"])
    assert row["cost_actual_source"] == "harbor"
    tokens = fold(served(job.split("-")[1]), {"reasoning": "output"})
    comparable = (tokens.uncached_input * 0.15 + tokens.cached_input * 0.075 + tokens.output * 0.6) / 1e6
    assert (row["cost_usd"], row["cost_source"]) == (pytest.approx(comparable), "snapshot")
    trajectory = json.loads(next((harbor_jobs / job).glob("hello__*/agent/trajectory.json")).read_text())
    calls = [c["function_name"] for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    events = list(Store(db).events(row["id"]))
    assert [json.loads(e[5])["tool_name"] for e in events if e[2] == "tool_call"] == calls
    assert row["tool_calls"] == len(calls)


def test_second_import_adds_nothing_and_a_running_job_imports_what_is_finished(harbor_jobs, db, tmp_path):
    job = tmp_path / "in-progress"
    shutil.copytree(harbor_jobs / "in-progress", job)
    code, err = cli("import", "harbor", str(job), "--db", str(db))
    assert code == 0 and "imported 1 trial(s), 1 not finished yet" in err, err
    assert [r["task_id"] for r in Store(db).trials()] == ["hello"]
    code, err = cli("import", "harbor", str(job), "--db", str(db))
    assert "imported 0 trial(s), 1 already in the store, 1 not finished yet" in err
    # The running trial finishes: copy the finished trial's result in (the slow task, as oracle-mixed ran it).
    (running,) = [p for p in job.glob("slow__*")]
    shutil.copy(next((harbor_jobs / "oracle-mixed").glob("slow__*/result.json")), running / "result.json")
    code, err = cli("import", "harbor", str(job), "--db", str(db))
    assert "imported 1 trial(s), 1 already in the store" in err
    assert sorted(r["task_id"] for r in Store(db).trials()) == ["hello", "slow"]


def test_transcript_from_the_cli_log_when_there_is_no_trajectory(harbor_jobs, db, tmp_path):
    # A trial of Harbor's claude-code agent keeps Claude Code's stream-json in agent/claude-code.txt.
    # Built from a real trial folder and a real Claude Code output recorded against the scripted server.
    job = tmp_path / "cc-job"
    (source,) = (harbor_jobs / "nop-fail").glob("hello__*")
    shutil.copytree(source, job / source.name)
    result = json.loads((source / "result.json").read_text())
    result["agent_info"] = {"name": "claude-code", "version": "2.1.197", "model_info": None}
    (job / source.name / "result.json").write_text(json.dumps(result))
    (job / source.name / "agent").mkdir(exist_ok=True)
    shutil.copy(STREAMS / "claude-code" / "write-file.stdout.jsonl", job / source.name / "agent" / "claude-code.txt")
    row = imported(db, job)["hello"]
    expected = json.loads((STREAMS / "claude-code" / "write-file.expected.json").read_text())
    assert (row["cli"], row["usage_source"]) == ("claude-code", "harbor:agent-log")
    assert TokenUsage.from_dict(row) == fold(TokenUsage.from_dict(expected["served"]), {"reasoning": "output"})
    assert row["tool_calls"] == 1


def test_a_trajectory_harbor_wrote_imports_as_atif(harbor_jobs, db):
    (path,) = (harbor_jobs / "terminus-solve").glob("hello__*/agent/trajectory.json")
    code, err = cli("import", "atif", str(path), "--db", str(db))
    assert code == 0, err
    (row,) = Store(db).trials("atif")
    assert (row["task_id"], row["cli"], row["model"]) == ("hello", "terminus-2", "openai/gpt-4o-mini")
    assert (row["status"], row["reason"], row["source"]) == ("failed", "unverified", "atif")  # no verdict in ATIF
    assert TokenUsage.from_dict(row) == fold(served("solve"), {"reasoning": "output"})
    assert json.loads(row["extra"])["atif"]["schema_version"] == json.loads(path.read_text())["schema_version"]


def test_a_multi_step_trial_is_one_trial_with_each_step(harbor_jobs, db):
    row = imported(db, harbor_jobs / "oracle-steps")["two-steps"]
    result = trial_result(harbor_jobs / "oracle-steps", "two-steps")
    assert [s["step_name"] for s in result["step_results"]] == ["write", "append"]
    assert (row["status"], row["quality"]) == ("passed", result["verifier_result"]["rewards"]["reward"])
    texts = [e[4] for e in Store(db).events(row["id"])]
    assert [t for t in texts if t.startswith("step ")] == ["step write", "step append"]
    assert "step write:" in row["verifier_output"] and "step append:" in row["verifier_output"]
