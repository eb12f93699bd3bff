"""Harbor's task format without a Docker engine: both schema spellings load with their unknown
keys kept, the contract a task follows, task folders read in place with include/exclude and
covered by the seed-prompt hash, reward files, ``agentmeter suite new``, and the oracle on the
local sandbox (the project's own task format) showing in the report like any CLI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.load import load_suite
from agentmeter_tui.core.tomlerrors import InputError
from agentmeter_tui.core.harbor.verifier import RewardError, headline, read_rewards
from tests.conftest import FIXTURES, ROOT, agentmeter

HARBOR = FIXTURES / "harbor"


@pytest.fixture
def harbor(tmp_path: Path) -> Path:
    shutil.copytree(HARBOR, tmp_path / "harbor")
    return tmp_path / "harbor"


def test_both_schema_spellings_load_with_unknown_keys_kept(harbor):
    suite = load_suite(harbor / "agents")
    greet, count = suite.task("greet"), suite.task("count")
    assert (greet.spec.version, count.spec.schema_version) == ("2.0", "1.1")
    assert greet.contract == count.contract == "harbor"
    # Harbor's keys, typed; keys we do not know kept, not errors.
    env = greet.spec.environment
    assert (env.cpus, env.memory_mb, env.storage_mb, env.allow_internet) == (1, 512, 1024, False)
    assert env.model_extra == {"gpus": 0}
    assert count.spec.task.model_extra["name"] == "agentmeter-tests/count"
    assert greet.spec.metadata["tags"] == ["trivial"]
    # [metadata] difficulty is the tier; [agent] timeout_sec the wall budget; [verifier] the verifier's.
    assert (greet.tier, count.tier) == ("easy", "medium")
    assert suite.budget_for(greet).wall_seconds == 120.0
    assert greet.verifier.timeout_sec == 60.0


def test_how_a_task_contract_is_chosen(tmp_path):
    from agentmeter_tui.core.harbor.taskfile import is_harbor

    assert is_harbor({"version": "2.0"}) and is_harbor({"schema_version": "1.0"})
    assert is_harbor({"verifier": {"kind": "harbor"}})  # explicit, without a version
    assert not is_harbor({"version": "2.0", "verifier": {"kind": "command"}})  # our verifier asked for
    assert not is_harbor({"task": {"tier": "easy"}})
    smoke = load_suite(ROOT / "suites" / "smoke")
    assert {t.contract for t in smoke.tasks} == {"agentmeter"}


def test_what_a_contract_answers():
    """Each difference between the two contracts has its own name; the names (in messages) did not change."""
    from agentmeter_tui.core.suites.taskfolders import TaskContract

    assert [c.value for c in TaskContract] == ["agentmeter", "harbor"]
    questions = ("needs_container", "image_contract", "agent_as_root", "agent_from_bundle", "reads_transcript")
    for question in questions:
        assert getattr(TaskContract.HARBOR, question) is True
        assert getattr(TaskContract.AGENTMETER, question) is False
    assert f"{TaskContract.HARBOR}" == "harbor" and TaskContract("agentmeter") is TaskContract.AGENTMETER


def test_harbor_tasks_need_a_container_sandbox(harbor):
    toml = harbor / "agents" / "suite.toml"
    toml.write_text(toml.read_text().replace('kind = "docker"', 'kind = "local"'))
    with pytest.raises(InputError) as bad:
        load_suite(harbor / "agents")
    assert bad.value.field == "sandbox.kind" and "Harbor's contract" in str(bad.value)
    assert toml.read_text().splitlines()[bad.value.line - 1] == 'kind = "local"'


def test_tasks_read_in_place_with_include_exclude_and_hashed(harbor):
    suite = load_suite(harbor / "oracle")
    assert [t.id for t in suite.tasks] == ["count", "greet", "no-solution", "probe"]
    assert all(t.path.parent == harbor / "tasks" for t in suite.tasks)  # not copied
    toml = harbor / "oracle" / "suite.toml"
    toml.write_text(toml.read_text().replace('tasks_dir = "../tasks"',
                                             'tasks_dir = "../tasks"\ninclude = ["g*", "p*"]\nexclude = ["probe"]'))
    assert [t.id for t in load_suite(harbor / "oracle").tasks] == ["greet"]
    # The seed-prompt hash covers tasks read from elsewhere: an instruction edited there changes it.
    before = load_suite(harbor / "oracle").seed_hash
    (harbor / "tasks" / "greet" / "instruction.md").write_text("Write something else.\n")
    assert load_suite(harbor / "oracle").seed_hash != before


def test_a_broken_task_elsewhere_is_skipped_with_file_and_line(harbor):
    (harbor / "tasks" / "count" / "task.toml").write_text('version = "2.0"\n[agent]\ntimeout_sec = "soon"\n')
    suite = load_suite(harbor / "oracle")
    assert "count" not in [t.id for t in suite.tasks] and len(suite.tasks) == 3
    (skipped,) = suite.skipped
    assert skipped.path.endswith("count/task.toml") and skipped.line == 3 and skipped.field == "agent.timeout_sec"


def test_pass_threshold_is_settable(harbor):
    toml = harbor / "agents" / "suite.toml"
    assert load_suite(harbor / "agents").spec.suite.pass_threshold == 1.0
    toml.write_text(toml.read_text().replace("trials = 1", "trials = 1\npass_threshold = 0.5"))
    assert load_suite(harbor / "agents").spec.suite.pass_threshold == 0.5


@pytest.mark.parametrize(("files", "rewards", "quality"), [
    ({"reward.txt": b"1\n"}, {"reward": 1.0}, 1.0),
    ({"reward.txt": b"0"}, {"reward": 0.0}, 0.0),  # Terminal-Bench 2 writes integers
    ({"reward.json": b'{"reward": 0.5}'}, {"reward": 0.5}, 0.5),
    ({"reward.json": b'{"reward": 0.25, "style": 1}'}, {"reward": 0.25, "style": 1.0}, 0.25),
    ({"reward.json": b'{"tests": 1, "style": 0.5}'}, {"tests": 1.0, "style": 0.5}, 0.75),  # no "reward": the mean
])
def test_reward_files(files, rewards, quality):
    found, source = read_rewards(files)
    assert found == rewards and headline(found) == quality and source == " + ".join(sorted(files))


@pytest.mark.parametrize("files", [{"reward.txt": b"pass"}, {"reward.json": b"[1]"}, {"reward.json": b"{"},
                                   {"reward.json": b'{"reward": true}'}, {"reward.txt": b"nan"}])
def test_bad_reward_files_are_reasons(files):
    with pytest.raises(RewardError):
        read_rewards(files)


def test_suite_new_writes_a_suite_over_a_task_folder(harbor, tmp_path):
    out = tmp_path / "suites" / "tb"
    args = ["suite", "new", "tb", "--tasks", str(harbor / "tasks"), "--model", "none", "--provider", "none",
            "--cli", "oracle", "--exclude", "no-*", "--out", str(out)]
    result = agentmeter(*args)
    assert result.returncode == 0, result.stderr
    suite = load_suite(out)
    assert suite.id == "tb" and [t.id for t in suite.tasks] == ["count", "greet", "probe"]
    assert suite.spec.sandbox.kind == "docker"  # Harbor tasks: the container sandbox
    assert [c.adapter for c in suite.spec.clis] == ["oracle"]
    again = agentmeter(*args)
    assert again.returncode == 2 and "exists" in again.stderr  # never overwritten unasked


def test_oracle_on_the_local_sandbox_shows_like_any_cli(tmp_path, db):
    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "suites" / "smoke", suite)
    text = (suite / "suite.toml").read_text()
    text = re.sub(r'(?m)^id = "smoke"', 'id = "oracle-local"', text).replace("trials = 2", "trials = 1")
    (suite / "suite.toml").write_text(text.replace('adapter = "reference"', 'adapter = "oracle"'))
    (suite / "count-lines" / "solution").mkdir()
    (suite / "count-lines" / "solution" / "solve.sh").write_text("wc -l < data.txt | tr -d ' ' > count.txt\n")
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout
    trials = Store(db).trials("oracle-local")
    assert {(t["task_id"], t["status"]) for t in trials} == {("count-lines", "passed"), ("write-greeting", "failed")}
    for trial in trials:
        assert trial["cli"] == "oracle" and trial["cost_usd"] == 0
        if trial["task_id"] == "write-greeting":
            assert trial["reason"] == "oracle: task folder write-greeting has no solution/solve.sh"
    report = agentmeter("report", "--db", str(db), "--format", "json")
    assert report.returncode == 0, report.stderr
    assert any("oracle" in json.dumps(row) for row in json.loads(report.stdout)["configurations"])
